// Sampling on the backend (Ops::sample_rows, fed by engine/device_sampling.h) draws the host
// sampler's token bitwise: the CPU op against Sampler::sample on random rows with every
// processor, ties and masks; and the engine with backend sampling on and off gives the same
// tokens for mixed batches (temperature, top-k/p, min-p, penalties, bias, a grammar, logprobs).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "engine/device_sampling.h"
#include "engine/sampler.h"
#include "engine_fixture.h"
#include "kernels/ref/sample_math.h"

namespace di::engine {
namespace {

// Allows token ids with (id % modulus) == 0 (and, at modulus 0, nothing); records what it saw.
class EveryNth : public TokenConstraint {
 public:
  explicit EveryNth(int modulus) : modulus_(modulus) {}
  void apply(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!allowed(i)) logits[i] = -INFINITY;
    }
  }
  Mask bitmask_kind() const override { return Mask::kMask; }
  Mask allowed_bitmask(std::span<uint32_t> words) override {
    std::fill(words.begin(), words.end(), 0u);
    for (size_t i = 0; i < words.size() * 32; ++i) {
      if (allowed(i)) words[i / 32] |= 1u << (i % 32);
    }
    return Mask::kMask;
  }
  void accept(int32_t token) override { seen.push_back(token); }
  void rollback(size_t n) override { seen.resize(seen.size() - n); }
  std::vector<int32_t> seen;

 private:
  bool allowed(size_t i) const { return modulus_ > 0 && i % static_cast<size_t>(modulus_) == 0; }
  int modulus_;
};

SamplingParams random_params(std::mt19937& rng, int i) {
  SamplingParams p;
  const float temps[] = {0.0f, 0.7f, 1.0f, 1.6f, 0.05f};
  const int ks[] = {0, 1, 3, 40, 0, 0};
  const float ps[] = {1.0f, 0.95f, 0.5f, 0.1f, 1.0f};
  const float mins[] = {0.0f, 0.0f, 0.02f, 0.3f};
  p.temperature = temps[i % 5];
  p.top_k = ks[i % 6];
  p.top_p = ps[i % 5 == 0 ? 4 : (i / 3) % 5];
  p.min_p = mins[(i / 2) % 4];
  p.repetition_penalty = i % 3 == 0 ? 1.3f : 1.0f;
  p.presence_penalty = i % 4 == 1 ? 0.5f : 0.0f;
  p.frequency_penalty = i % 5 == 2 ? -0.25f : 0.0f;
  p.seed = rng();
  if (i % 3 == 1) {
    p.logit_bias = {{5, 3.0f}, {17, -100.0f}, {5, 0.5f}, {60, 2.5f}};  // 5 twice: in order
  }
  return p;
}

TEST(BackendSampling, CpuOpDrawsTheSamplersTokenBitwise) {
  ThreadPool pool(2);
  backend::CpuOps ops(pool);
  std::mt19937 rng(11);
  const int64_t V = 1000;
  const int rows = 120;
  std::normal_distribution<float> logit(0.0f, 2.5f);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V) - 1), len(0, 30);
  std::vector<float> x(static_cast<size_t>(rows * V));
  for (auto& v : x) v = logit(rng);
  for (int r = 0; r < rows; r += 4) {  // ties: few distinct values, -0 and +0 among them
    const float values[] = {-1.5f, -0.0f, 0.0f, 0.25f, 3.0f, 3.0f};
    for (int64_t j = 0; j < V; ++j) x[static_cast<size_t>(r * V + j)] = values[tok(rng) % 6];
  }
  model::LogitsSelection sel;
  std::vector<kernels::sample::RowParams> params(static_cast<size_t>(rows));
  std::vector<int32_t> counts, host(static_cast<size_t>(rows));
  Sampler sampler;
  for (int r = 0; r < rows; ++r) {
    const SamplingParams p = random_params(rng, r);
    std::vector<int32_t> prompt(static_cast<size_t>(len(rng))),
        output(static_cast<size_t>(len(rng)));
    for (auto& t : prompt) t = tok(rng) % 80;  // overlapping, repeated tokens
    for (auto& t : output) t = tok(rng) % 80;
    // Row 7: nothing allowed (every logit -inf: both take index 0); others every 1st, 2nd, 3rd.
    const int modulus = r == 7 ? 0 : r % 3 + 1;
    EveryNth c1(modulus), c2(modulus);
    const bool constrained = r % 5 == 3 || r == 7;
    const uint64_t stream = static_cast<uint64_t>(r % 2), pos = prompt.size() + output.size();
    std::vector<float> row(x.begin() + r * V, x.begin() + (r + 1) * V);
    host[static_cast<size_t>(r)] =
        sampler.sample(row, p, prompt, output, stream, pos, constrained ? &c1 : nullptr).token;
    int64_t mask_at = -1;
    ASSERT_TRUE(add_backend_sample_row(p, prompt, output, stream, pos, constrained ? &c2 : nullptr,
                                       V, counts, params[static_cast<size_t>(r)], sel, mask_at));
    ASSERT_EQ(mask_at >= 0, constrained);
    // The mask is written later (as the engine's fill_masks does after issuing the forward).
    if (constrained) {
      const auto words = static_cast<size_t>(kernels::sample::mask_words(V));
      ASSERT_EQ(c2.allowed_bitmask(
                    std::span<uint32_t>(sel.masks).subspan(static_cast<size_t>(mask_at), words)),
                TokenConstraint::Mask::kMask);
    }
  }
  kernels::sample::RowsArgs a;
  a.params = params.data();
  a.penalty_tokens = sel.penalty_tokens.data();
  a.penalty_counts = sel.penalty_counts.data();
  a.num_penalties = static_cast<int64_t>(sel.penalty_tokens.size());
  a.bias_tokens = sel.bias_tokens.data();
  a.bias_values = sel.bias_values.data();
  a.num_bias = static_cast<int64_t>(sel.bias_tokens.size());
  a.masks = sel.masks.data();
  a.num_masks = static_cast<int64_t>(sel.masks.size()) / kernels::sample::mask_words(V);
  std::vector<int32_t> backend(static_cast<size_t>(rows), -2);
  ops.sample_rows({x.data(), rows, V}, a, backend.data());
  EXPECT_EQ(backend, host);
  EXPECT_EQ(host[7], 0);
}

TEST(BackendSampling, TopKKeepsTiesWithTheKthLogitAndTopPItsGroup) {
  // Logits 3, 2, 2, 2, 1: top-k 2 keeps the three 2s too; top-p 0.3 cuts after the first token
  // (weight 1 of 1 + 3e^-1 + e^-2 = 2.24: 0.45 >= 0.3) and top-p 0.5 keeps the 2s as a group.
  const std::vector<float> l = {3.0f, 2.0f, 2.0f, 2.0f, 1.0f};
  kernels::sample::DrawScratch s;
  kernels::sample::RowParams p;
  p.temperature = 1.0f;
  std::map<int, int> seen_k, seen_p1, seen_p2;
  for (uint64_t i = 0; i < 3000; ++i) {
    p.key = kernels::sample::row_key(3, 0, i);
    p.top_k = 2;
    p.top_p = 1.0f;
    seen_k[kernels::sample::draw(l, p, s)]++;
    p.top_k = 0;
    p.top_p = 0.3f;
    seen_p1[kernels::sample::draw(l, p, s)]++;
    p.top_p = 0.5f;
    seen_p2[kernels::sample::draw(l, p, s)]++;
  }
  EXPECT_EQ(seen_k.size(), 4u);
  EXPECT_EQ(seen_k.count(4), 0u);
  EXPECT_EQ(seen_p1.size(), 1u);
  EXPECT_EQ(seen_p2.size(), 4u);
  // Within the kept set the draw follows softmax: token 0 has e / (e + 3) = 0.475.
  EXPECT_NEAR(seen_k[0] / 3000.0, std::exp(1.0) / (std::exp(1.0) + 3.0), 0.03);
}

TEST(BackendSampling, PortableMathIsAccurate) {
  for (double x : {1e-16, 0.001, 0.3, 0.7071, 1.0, 1.5, 2.0, 37.0, 1e6}) {
    EXPECT_NEAR(kernels::sample::portable_log(x), std::log(x),
                1e-14 * (1 + std::fabs(std::log(x))));
  }
  for (double x : {0.0, -1e-9, -0.3, -0.35, -1.0, -7.5, -22.9}) {
    EXPECT_NEAR(kernels::sample::portable_exp_neg(x), std::exp(x), 1e-15);
  }
  EXPECT_EQ(kernels::sample::weight(0.0), uint64_t{1} << 32);
}

// The engine: backend sampling on and off, the same tokens for a mixed batch.
TEST_F(EngineTest, BackendSamplingGivesTheHostSamplersTokens) {
  auto reqs = random_requests(12, 9, /*sampled=*/true);
  std::mt19937 rng(5);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SamplingParams p = random_params(rng, static_cast<int>(i));
    p.seed = 500 + i;
    if (i % 6 == 5) p.logprobs = true;  // the host path, mixed in
    reqs[i].sampling = p;
    reqs[i].max_tokens = 6;
  }
  auto run_with = [&](bool backend) {
    auto rs = reqs;
    for (size_t i = 0; i < rs.size(); ++i) {
      if (i % 4 == 2) rs[i].constraint = std::make_shared<EveryNth>(2);
    }
    EngineOptions o{12, 96, 16 << 20, 16};
    o.backend_sampling = backend;
    auto e = make(o);
    return run(*e, rs);
  };
  const auto on = run_with(true), off = run_with(false);
  EXPECT_EQ(on, off);
  for (size_t i = 2; i < reqs.size(); i += 4) {
    for (int32_t t : on.at(reqs[i].id)) EXPECT_EQ(t % 2, 0) << "request " << i;
  }
}

// Pending tokens (steps issued on the previous step's tokens before they reach the host): the
// same tokens as waiting for every step, for greedy and sampled requests with stop tokens and
// lengths that end them at different steps, with cancellations while steps run; and for a batch
// that mixes in penalized, logprobs and constrained requests (which make a step wait).
TEST_F(EngineTest, PendingTokensGiveTheSameTokens) {
  auto reqs = random_requests(14, 19, /*sampled=*/true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i % 3 == 1) reqs[i].sampling = SamplingParams{};  // greedy
    reqs[i].max_tokens = 3 + static_cast<int>(i % 9);
  }
  auto run_with = [&](bool pending, const std::vector<Request>& rs, int cancel_at) {
    EngineOptions o{8, 40, 16 << 20, 16};
    o.pending_tokens = pending;
    auto e = make(o);
    std::map<RequestId, std::vector<int32_t>> out;
    for (const Request& r : rs) EXPECT_TRUE(e->add_request(r).ok());
    int steps = 0;
    while (e->has_unfinished()) {
      for (const RequestUpdate& u : e->step()) {
        EXPECT_NE(u.finish, FinishReason::kError) << u.error;
        for (const auto& t : u.new_tokens) out[u.id].push_back(t.token);
      }
      // Cancelled at a fixed step: how far they got may differ, their tokens may not.
      if (++steps == cancel_at) {
        e->cancel(2);
        e->abort_request(9);
      }
    }
    if (!pending) {
      EXPECT_EQ(e->stats().num_pending_steps, 0);
    }
    return std::make_pair(out, e->stats().num_pending_steps);
  };
  const auto off = run_with(false, reqs, 0).first;
  const auto on = run_with(true, reqs, 0);
  EXPECT_EQ(on.first, off);
  EXPECT_GT(on.second, 0) << "no step was issued on pending tokens";
  // Stop tokens: each request's second token ends it (and every other one that meets it).
  auto stopping = reqs;
  for (auto& r : stopping) {
    const auto& mine = off.at(r.id);
    if (mine.size() > 1) r.stop_token_ids = {mine[1]};
  }
  const auto stop_off = run_with(false, stopping, 0).first;
  EXPECT_EQ(run_with(true, stopping, 0).first, stop_off);
  for (const auto& r : stopping) {
    if (off.at(r.id).size() > 1) {
      EXPECT_LE(stop_off.at(r.id).size(), 2u) << "request " << r.id;
    }
  }
  // Cancelled requests: a prefix of their tokens, the others all of theirs.
  for (int at : {2, 5, 8}) {
    const auto cancelled = run_with(true, reqs, at).first;
    for (const auto& r : reqs) {
      const auto got = cancelled.count(r.id) ? cancelled.at(r.id) : std::vector<int32_t>{};
      const auto& want = off.at(r.id);
      if (r.id == 2 || r.id == 9) {
        ASSERT_LE(got.size(), want.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "request " << r.id;
      } else {
        EXPECT_EQ(got, want) << "request " << r.id << ", cancelled at step " << at;
      }
    }
  }
  // Mixed in: requests whose next token needs the host.
  auto mixed = reqs;
  std::mt19937 rng(8);
  for (size_t i = 0; i < mixed.size(); i += 4) {
    SamplingParams p = random_params(rng, static_cast<int>(i));
    p.seed = 700 + i;
    p.presence_penalty = 0.5f;
    mixed[i].sampling = p;
  }
  mixed[5].sampling.logprobs = true;
  mixed[6].constraint = std::make_shared<EveryNth>(3);
  auto mixed_off = mixed, mixed_on = mixed;
  mixed_on[6].constraint = std::make_shared<EveryNth>(3);
  const auto m_off = run_with(false, mixed_off, 0).first;
  EXPECT_EQ(run_with(true, mixed_on, 0).first, m_off);
  for (int32_t t : m_off.at(6)) EXPECT_EQ(t % 3, 0);
}

}  // namespace
}  // namespace di::engine
