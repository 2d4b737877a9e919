// N-gram hashing: exact golden rows for the v41-mini prompts, and chunked (streaming)
// hashing equal to one-shot hashing.
#include "model/engram/ngram_hasher.h"

#include <gtest/gtest.h>

#include <random>

#include "kernels/ref/engram_hash.h"
#include "model/engram/multipliers.h"
#include "unit/engram/golden_reader.h"

namespace di::engram {
namespace {

constexpr int32_t kPadTokenId = 2;  // engram_pad_id of v41-mini

struct Fixture {
  testing::GoldenFile golden;
  std::vector<int32_t> token_map;
  NgramHasher hasher;
};

std::vector<int32_t> to_i32(const std::vector<int64_t>& v) {
  return {v.begin(), v.end()};
}

// Builds the v41-mini hasher from first principles (layout, numpy multipliers) with the
// golden token map; any failure is reported through gtest.
std::optional<Fixture> make_fixture() {
  testing::GoldenFile golden;
  std::string error;
  if (!golden.open(testing::golden_dir() + "/golden.safetensors", error)) {
    ADD_FAILURE() << error;
    return std::nullopt;
  }
  testing::GoldenTensor map;
  if (!golden.read("engram.token_map", map)) {
    ADD_FAILURE() << "no engram.token_map";
    return std::nullopt;
  }
  auto layout = EngramLayout::from_config(
      {.layer_ids = {0, 1}, .max_ngram_size = 3, .n_heads = 2, .vocab_size = 50});
  auto mult = hash_multipliers_for_layers({0, 1}, 3, 125);
  if (!layout || !mult) {
    ADD_FAILURE() << "layout or multipliers failed";
    return std::nullopt;
  }
  std::vector<int32_t> token_map = to_i32(map.values);
  auto hasher = NgramHasher::create(*layout, *mult, token_map[kPadTokenId]);
  if (!hasher) {
    ADD_FAILURE() << hasher.status().to_string();
    return std::nullopt;
  }
  return Fixture{std::move(golden), std::move(token_map), std::move(hasher).value()};
}

std::vector<int32_t> compressed_prompt(const Fixture& f, int seq) {
  testing::GoldenTensor prompt;
  EXPECT_TRUE(f.golden.read("seq" + std::to_string(seq) + ".prompt", prompt));
  const std::vector<int32_t> ids = to_i32(prompt.values);
  std::vector<int32_t> out(ids.size());
  EXPECT_TRUE(compress_tokens(f.token_map, ids, out).ok());
  return out;
}

TEST(NgramHasher, GoldenHashes) {
  auto f = make_fixture();
  ASSERT_TRUE(f.has_value());
  for (int seq = 0; seq < 3; ++seq) {
    const std::vector<int32_t> tokens = compressed_prompt(*f, seq);
    testing::GoldenTensor expected;
    ASSERT_TRUE(f->golden.read("seq" + std::to_string(seq) + ".full.engram_hash", expected));
    ASSERT_EQ(expected.shape, (std::vector<int64_t>{static_cast<int64_t>(tokens.size()), 2, 4}));
    std::vector<int64_t> got(tokens.size() * f->hasher.values_per_position());
    NgramHistory history;
    ASSERT_TRUE(f->hasher.hash(tokens, history, got).ok());
    EXPECT_EQ(got, expected.values) << "seq" << seq;
  }
}

TEST(NgramHasher, ChunkedEqualsOneShot) {
  auto f = make_fixture();
  ASSERT_TRUE(f.has_value());
  std::mt19937 gen(1234);
  for (int seq = 0; seq < 3; ++seq) {
    std::vector<int32_t> tokens = compressed_prompt(*f, seq);
    tokens[5] = -1;  // a dead (e.g. image) token exercises the blocking across chunks
    const std::size_t per = f->hasher.values_per_position();
    std::vector<int64_t> one_shot(tokens.size() * per);
    NgramHistory h1;
    ASSERT_TRUE(f->hasher.hash(tokens, h1, one_shot).ok());
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int64_t> chunked(tokens.size() * per);
      NgramHistory h2;
      std::size_t at = 0;
      while (at < tokens.size()) {
        const std::size_t len =
            std::min(tokens.size() - at, std::uniform_int_distribution<std::size_t>(0, 7)(gen));
        ASSERT_TRUE(f->hasher
                        .hash(std::span(tokens).subspan(at, len), h2,
                              std::span(chunked).subspan(at * per, len * per))
                        .ok());
        at += len;
      }
      EXPECT_EQ(chunked, one_shot) << "seq" << seq << " trial " << trial;
      EXPECT_EQ(h2.position, static_cast<int64_t>(tokens.size()));
    }
  }
}

TEST(NgramHasher, DeadTokenBlocksLongerLookBacks) {
  auto f = make_fixture();
  ASSERT_TRUE(f.has_value());
  const int32_t pad = f->token_map[kPadTokenId];
  const std::size_t per = f->hasher.values_per_position();
  // [a, dead, b]: at b the 2-gram and 3-gram both see the pad, exactly as at the
  // sequence start [b] does.
  std::vector<int32_t> with_dead = {7, -1, 9};
  std::vector<int32_t> start = {9};
  std::vector<int64_t> out_dead(3 * per), out_start(per);
  NgramHistory h1, h2;
  ASSERT_TRUE(f->hasher.hash(with_dead, h1, out_dead).ok());
  ASSERT_TRUE(f->hasher.hash(start, h2, out_start).ok());
  EXPECT_TRUE(std::equal(out_start.begin(), out_start.end(), out_dead.begin() + 2 * per));
  // The dead position itself hashes the all-pad n-grams.
  std::vector<int32_t> pads = {pad};
  std::vector<int64_t> out_pad(per);
  NgramHistory h3;
  ASSERT_TRUE(f->hasher.hash(pads, h3, out_pad).ok());
  EXPECT_TRUE(std::equal(out_pad.begin(), out_pad.end(), out_dead.begin() + per));
}

// A position whose own token is pending (hashed later from the look-back alone, as the backends'
// engram_hash_rows do) gives the rows one-shot hashing gives, dead tokens included, and the
// history then continues as if the token had been known.
TEST(NgramHasher, PendingPositionsHashLikeKnownOnes) {
  auto f = make_fixture();
  ASSERT_TRUE(f.has_value());
  const int32_t pad = f->token_map[kPadTokenId];
  const std::size_t per = f->hasher.values_per_position();
  const int n = f->hasher.max_ngram_size();
  const std::size_t buckets = static_cast<std::size_t>(f->hasher.buckets_per_layer());
  for (int seq = 0; seq < 3; ++seq) {
    std::vector<int32_t> tokens = compressed_prompt(*f, seq);
    tokens[4] = -1;  // dead: blocks its own look-backs and the next positions'
    std::vector<int64_t> one_shot(tokens.size() * per);
    NgramHistory h1;
    ASSERT_TRUE(f->hasher.hash(tokens, h1, one_shot).ok());
    std::vector<int64_t> got(tokens.size() * per);
    NgramHistory h2;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      if (t % 3 == 1) {  // known: the ordinary path in between
        ASSERT_TRUE(
            f->hasher
                .hash(std::span(tokens).subspan(t, 1), h2, std::span(got).subspan(t * per, per))
                .ok());
        continue;
      }
      std::vector<int32_t> look_back(static_cast<std::size_t>(n - 1));
      ASSERT_TRUE(f->hasher.look_back_pending(h2, look_back).ok());
      std::vector<int64_t> shifted(static_cast<std::size_t>(n), pad);
      if (tokens[t] >= 0) {
        shifted[0] = tokens[t];
        for (int s = 1; s < n; ++s) shifted[static_cast<std::size_t>(s)] = look_back[s - 1];
      }
      for (int l = 0; l < f->hasher.n_layers(); ++l) {
        kernels::engram::hash_position(
            shifted.data(), n, f->hasher.n_heads(), f->hasher.multipliers(l).data(),
            f->hasher.primes(l).data(), f->hasher.offsets(l).data(),
            got.data() + t * per + static_cast<std::size_t>(l) * buckets);
      }
      // Pending until resolved: no further chunk, and only one pending token at a time.
      std::vector<int64_t> scratch(per);
      EXPECT_FALSE(f->hasher.hash(std::span(tokens).subspan(t, 1), h2, scratch).ok());
      EXPECT_FALSE(f->hasher.look_back_pending(h2, look_back).ok());
      ASSERT_TRUE(NgramHasher::resolve_pending(h2, tokens[t]).ok());
      EXPECT_FALSE(NgramHasher::resolve_pending(h2, tokens[t]).ok());
    }
    EXPECT_EQ(got, one_shot) << "seq" << seq;
    EXPECT_EQ(h2.recent, h1.recent);
    EXPECT_EQ(h2.position, h1.position);
  }
}

TEST(NgramHasher, RejectsBadArguments) {
  auto f = make_fixture();
  ASSERT_TRUE(f.has_value());
  std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<int64_t> out(5);
  NgramHistory h;
  EXPECT_FALSE(f->hasher.hash(tokens, h, out).ok());
  EXPECT_EQ(h.position, 0);
  std::vector<int32_t> compressed(1);
  std::vector<int32_t> bad_ids = {512};
  EXPECT_FALSE(compress_tokens(f->token_map, bad_ids, compressed).ok());

  auto layout = EngramLayout::from_config(
      {.layer_ids = {0, 1}, .max_ngram_size = 3, .n_heads = 2, .vocab_size = 50});
  ASSERT_TRUE(layout.has_value());
  EXPECT_FALSE(NgramHasher::create(*layout, {{1, 3, 5}}, 2).has_value());       // 1 layer
  EXPECT_FALSE(NgramHasher::create(*layout, {{1, 3}, {1, 3}}, 2).has_value());  // 2 per layer
  EXPECT_FALSE(NgramHasher::create(*layout, {{1, 3, 5}, {1, 3, 5}}, -1).has_value());  // dead pad
}

}  // namespace
}  // namespace di::engram
