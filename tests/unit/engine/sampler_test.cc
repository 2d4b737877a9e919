#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace di::engine {
namespace {

std::vector<float> logits_of(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampler, GreedyTakesTheArgmax) {
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f};
  EXPECT_EQ(sample_token(l, {}, 0, 0), 1);
}

TEST(Sampler, SameSeedStreamAndPositionGiveTheSameToken) {
  auto l = logits_of({0.25, 0.25, 0.25, 0.25});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  for (uint64_t pos = 0; pos < 50; ++pos) {
    EXPECT_EQ(sample_token(l, p, 3, pos), sample_token(l, p, 3, pos));
  }
  int differ = 0;
  for (uint64_t pos = 0; pos < 50; ++pos)
    differ += sample_token(l, p, 3, pos) != sample_token(l, p, 4, pos);
  EXPECT_GT(differ, 10);  // streams (choices) are independent
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[sample_token(l, p, 0, static_cast<uint64_t>(i))]++;
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[3] / double(n), 0.05, 0.01);
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.temperature = 1.0f;
  for (uint64_t i = 0; i < 2000; ++i) {
    p.top_k = 2;
    EXPECT_LT(sample_token(l, p, 0, i), 2);
    p.top_k = 0;
    p.top_p = 0.75f;  // 0.5 + 0.3 reaches it: two tokens
    EXPECT_LT(sample_token(l, p, 0, i), 2);
    p.top_p = 1.0f;
    p.min_p = 0.5f;  // keeps p >= 0.25
    EXPECT_LT(sample_token(l, p, 0, i), 2);
    p.min_p = 0.0f;
  }
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_FALSE(validate_sampling(p).ok());
  p = {};
  p.top_p = 0;
  EXPECT_NE(validate_sampling(p).message().find("top_p"), std::string::npos);
  p = {};
  p.top_k = -2;
  EXPECT_FALSE(validate_sampling(p).ok());
  EXPECT_TRUE(validate_sampling({}).ok());
}

// Allows only even ids; records what it was told.
class EvenOnly : public TokenConstraint {
 public:
  void apply(std::span<float> logits) override {
    for (size_t i = 1; i < logits.size(); i += 2) logits[i] = -INFINITY;
  }
  void accept(int32_t token) override { seen.push_back(token); }
  void rollback(size_t n) override { seen.resize(seen.size() - n); }
  std::vector<int32_t> seen;
};

TEST(Sampler, ConstraintMasksTheDrawAndSeesTheToken) {
  Sampler s;
  EvenOnly c;
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  for (uint64_t pos = 0; pos < 200; ++pos) {
    auto l = logits_of({0.1, 0.4, 0.1, 0.4});  // the odd ids are likelier, but not allowed
    SampleResult r = s.sample(l, p, {}, {}, 0, pos, &c);
    EXPECT_EQ(r.token % 2, 0);
    EXPECT_EQ(c.seen.back(), r.token);
  }
  EXPECT_EQ(c.seen.size(), 200u);
}

}  // namespace
}  // namespace di::engine
