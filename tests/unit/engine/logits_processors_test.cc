// Penalties, logit bias and logprobs on hand-computed rows, and the Sampler chaining them.
#include "engine/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>

namespace di::engine {
namespace {

TEST(LogitsProcessors, RepetitionPenaltyDividesPositivesAndMultipliesNegativesOnce) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 4.0f};
  std::vector<int32_t> counts(4, 0);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 0, 1}, out = {1, 0};
  apply_penalties(l, p, prompt, out, counts);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 1.0f, 4.0f}));
  EXPECT_EQ(counts, (std::vector<int32_t>(4, 0)));
}

TEST(LogitsProcessors, PresenceAndFrequencyCountOutputTokensOnly) {
  std::vector<float> l = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> counts(3, 0);
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {2, 2}, out = {1, 1, 1, 0};
  apply_penalties(l, p, prompt, out, counts);
  EXPECT_FLOAT_EQ(l[0], -0.75f);
  EXPECT_FLOAT_EQ(l[1], -1.25f);
  EXPECT_FLOAT_EQ(l[2], 0.0f);
  EXPECT_EQ(counts, (std::vector<int32_t>(3, 0)));
}

TEST(LogitsProcessors, LogitBiasCanForceAToken) {
  std::vector<float> l = {5.0f, 0.0f, 1.0f};
  const std::vector<std::pair<int32_t, float>> bias = {{1, 100.0f}};
  SamplingParams p;
  p.logit_bias = bias;
  Sampler s;
  EXPECT_EQ(s.sample(l, p, {}, {}, 0, 0).token, 1);
}

TEST(LogitsProcessors, LogprobsAreLogSoftmaxWithTopK) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<int32_t> ids;
  const TokenLogprobs lp = compute_logprobs(l, 2, 3, ids);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_TRUE(lp.present);
  EXPECT_NEAR(lp.logprob, 2.0 - z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // ties: lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - z, 1e-6);
}

TEST(LogitsProcessors, MaskedTokensAreNoTopAlternatives) {
  std::vector<float> l = {-INFINITY, 0.5f, -INFINITY, 0.0f};
  std::vector<int32_t> ids;
  const TokenLogprobs lp = compute_logprobs(l, 1, 4, ids);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 3);
}

TEST(LogitsProcessors, SamplerReportsLogprobsOnlyWhenAsked) {
  std::vector<float> l = {0.0f, 1.0f};
  SamplingParams p;
  Sampler s;
  EXPECT_FALSE(s.sample(l, p, {}, {}, 0, 0).logprobs.present);
  p.logprobs = true;
  p.top_logprobs = 2;
  auto r = s.sample(l, p, {}, {}, 0, 0);
  EXPECT_EQ(r.token, 1);
  EXPECT_EQ(r.logprobs.top.size(), 2u);
}

TEST(LogitsProcessors, ValidationRejectsOutOfRangeValues) {
  SamplingParams p;
  p.presence_penalty = 3.0f;
  EXPECT_FALSE(validate_sampling(p).ok());
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_FALSE(validate_sampling(p).ok());
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_TRUE(validate_sampling(p).ok());
  EXPECT_FALSE(validate_sampling(p, 10).ok());
  p.top_logprobs = 21;
  EXPECT_FALSE(validate_sampling(p).ok());
}

}  // namespace
}  // namespace di::engine
