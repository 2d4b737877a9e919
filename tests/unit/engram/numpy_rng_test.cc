// numpy.random reproduction: the golden multipliers were drawn by numpy in the reference,
// so they check SeedSequence, PCG64 seeding/output and the 64-bit bounded draw together.
#include "model/engram/numpy_rng.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/engram/multipliers.h"
#include "unit/engram/golden_reader.h"

namespace di::engram {
namespace {

TEST(NumpyRng, GoldenMultipliers) {
  testing::GoldenFile golden;
  std::string error;
  ASSERT_TRUE(golden.open(testing::golden_dir() + "/golden.safetensors", error)) << error;
  testing::GoldenTensor expected;
  ASSERT_TRUE(golden.read("engram.multipliers", expected));
  ASSERT_EQ(expected.shape, (std::vector<int64_t>{2, 3}));
  // v41-mini: engram layers [0, 1], max_ngram_size 3, compressed vocabulary 125.
  auto got = hash_multipliers_for_layers({0, 1}, 3, 125);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  std::vector<int64_t> flat;
  for (const auto& layer : *got) flat.insert(flat.end(), layer.begin(), layer.end());
  EXPECT_EQ(flat, expected.values);
}

// Values printed by numpy for well-known seeds (numpy >= 1.17).
TEST(NumpyRng, KnownNumpyStreams) {
  // np.random.default_rng(12345).random() == 0.22733602246716966; random() is
  // (next_uint64 >> 11) * 2**-53.
  Pcg64 a = Pcg64::from_seed(12345);
  EXPECT_DOUBLE_EQ(static_cast<double>(a.next_uint64() >> 11) * std::ldexp(1.0, -53),
                   0.22733602246716966);
  // np.random.default_rng(42).integers(low=0, high=10, size=3) == [0, 7, 6]: the 32-bit
  // buffered Lemire path.
  Pcg64 b = Pcg64::from_seed(42);
  auto small = integers_int64(b, 0, 10, 3);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(*small, (std::vector<int64_t>{0, 7, 6}));
}

TEST(NumpyRng, SeedSequenceWordPairing) {
  // generate_state(n, uint64) pairs the uint32 stream little-endian.
  const auto w32 = seed_sequence_state_u32(10007, 8);
  const auto w64 = seed_sequence_state_u64(10007, 4);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(w64[i],
              static_cast<uint64_t>(w32[2 * i]) | (static_cast<uint64_t>(w32[2 * i + 1]) << 32));
  }
}

TEST(NumpyRng, Next32UsesLowHalfThenHighHalf) {
  Pcg64 a = Pcg64::from_seed(7);
  Pcg64 b = Pcg64::from_seed(7);
  const uint64_t word = a.next_uint64();
  EXPECT_EQ(b.next_uint32(), static_cast<uint32_t>(word));
  EXPECT_EQ(b.next_uint32(), static_cast<uint32_t>(word >> 32));
  EXPECT_EQ(b.next_uint64(), a.next_uint64());
}

TEST(NumpyRng, IntegersEdgeCases) {
  Pcg64 rng = Pcg64::from_seed(1);
  EXPECT_FALSE(integers_int64(rng, 5, 5, 1).has_value());
  auto single = integers_int64(rng, 5, 6, 4);  // range 0: always low, draws nothing
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(*single, (std::vector<int64_t>{5, 5, 5, 5}));
  for (int64_t high : {int64_t{3}, int64_t{1} << 32, (int64_t{1} << 32) + 1, int64_t{1} << 62}) {
    auto v = integers_int64(rng, -2, high, 64);
    ASSERT_TRUE(v.has_value());
    for (int64_t x : *v) {
      EXPECT_GE(x, -2);
      EXPECT_LT(x, high);
    }
  }
}

TEST(NumpyRng, MultiplierArgumentsAreValidated) {
  EXPECT_FALSE(hash_multipliers(-1, 3, 125).has_value());
  EXPECT_FALSE(hash_multipliers(1, 3, 0).has_value());
  EXPECT_FALSE(hash_multipliers(1, 0, 125).has_value());
  auto odd = hash_multipliers(14, 4, 98627);
  ASSERT_TRUE(odd.has_value());
  for (int64_t m : *odd) EXPECT_EQ(m % 2, 1);
}

}  // namespace
}  // namespace di::engram
