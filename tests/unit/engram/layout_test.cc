// Engram table layout: primes, offsets and row counts for the golden model and for the
// released V4.1-Flash configuration.
#include "model/engram/layout.h"

#include <gtest/gtest.h>

#include "model/engram/primes.h"
#include "unit/engram/golden_reader.h"

namespace di::engram {
namespace {

TEST(Primes, MillerRabinAgreesWithTrialDivision) {
  for (uint64_t n = 0; n < 20000; ++n) {
    bool prime = n >= 2;
    for (uint64_t d = 2; d * d <= n && prime; ++d) prime = n % d != 0;
    EXPECT_EQ(is_prime_u64(n), prime) << n;
  }
  EXPECT_TRUE(is_prime_u64(18446744073709551557ull));  // largest 64-bit prime
  EXPECT_FALSE(is_prime_u64(3215031751ull));           // strong pseudoprime to 2, 3, 5, 7
  EXPECT_FALSE(is_prime_u64(18446744073709551615ull));
}

TEST(Primes, FindNextPrimeSkipsSeen) {
  auto p = find_next_prime(49, {53});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, 59);
  EXPECT_FALSE(find_next_prime(std::numeric_limits<int64_t>::max() - 1, {}).has_value());
}

TEST(Layout, GoldenPrimesAndOffsets) {
  testing::GoldenFile golden;
  std::string error;
  ASSERT_TRUE(golden.open(testing::golden_dir() + "/golden.safetensors", error)) << error;
  testing::GoldenTensor primes, offsets;
  ASSERT_TRUE(golden.read("engram.primes", primes));
  ASSERT_TRUE(golden.read("engram.offsets", offsets));

  auto layout = EngramLayout::from_config(
      {.layer_ids = {0, 1}, .max_ngram_size = 3, .n_heads = 2, .vocab_size = 50});
  ASSERT_TRUE(layout.has_value()) << layout.status().to_string();
  std::vector<int64_t> got_primes, got_offsets;
  for (std::size_t l = 0; l < 2; ++l) {
    got_primes.insert(got_primes.end(), layout->primes[l].begin(), layout->primes[l].end());
    got_offsets.insert(got_offsets.end(), layout->offsets[l].begin(), layout->offsets[l].end());
  }
  EXPECT_EQ(got_primes, primes.values);
  EXPECT_EQ(got_offsets, offsets.values);
  EXPECT_EQ(layout->table_rows, (std::vector<int64_t>{240, 306}));  // engram_num_embeddings
}

TEST(Layout, ReleasedModelRowCounts) {
  // V4.1-Flash: engram_vocab_size 16,000,000, 8 heads, n-grams up to 4, layers 1 and 14.
  auto layout = EngramLayout::from_config(
      {.layer_ids = {1, 14}, .max_ngram_size = 4, .n_heads = 8, .vocab_size = 16000000});
  ASSERT_TRUE(layout.has_value()) << layout.status().to_string();
  EXPECT_EQ(layout->primes[0].front(), 16000057);  // first prime above the vocabulary
  EXPECT_EQ(layout->table_rows, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(layout->primes[0].size(), 24u);
}

TEST(Layout, RejectsBadConfig) {
  EXPECT_FALSE(EngramLayout::from_config(
                   {.layer_ids = {0}, .max_ngram_size = 1, .n_heads = 2, .vocab_size = 50})
                   .has_value());
  EXPECT_FALSE(EngramLayout::from_config(
                   {.layer_ids = {0}, .max_ngram_size = 3, .n_heads = 0, .vocab_size = 50})
                   .has_value());
  EXPECT_FALSE(EngramLayout::from_config(
                   {.layer_ids = {0}, .max_ngram_size = 3, .n_heads = 2, .vocab_size = 0})
                   .has_value());
}

}  // namespace
}  // namespace di::engram
