// The engine on the golden v41-mini checkpoint: continuous batching gives every request the
// tokens it gets alone (greedy and seeded sampling), preemption under a tiny state budget still
// completes everything with the same tokens, cancellation frees all state, and bad requests are
// rejected as values.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include "engine_fixture.h"

namespace di::engine {
namespace {

TEST_F(EngineTest, SixtyFourConcurrentGreedyRequestsMatchEachRunAlone) {
  const auto reqs = random_requests(64, 5, /*sampled=*/false);
  const auto alone = run_each_alone(reqs);
  // A small token budget forces chunked prefill mixed with decode steps.
  auto e = make({64, 48, 32 << 20, 16});
  const auto batched = run(*e, reqs);
  ASSERT_EQ(batched.size(), reqs.size());
  for (const Request& r : reqs) {
    EXPECT_EQ(batched.at(r.id), alone.at(r.id)) << "request " << r.id;
    EXPECT_EQ(batched.at(r.id).size(), static_cast<size_t>(r.max_tokens));
  }
  EXPECT_GT(e->stats().num_steps, 0);
}

TEST_F(EngineTest, GreedyRowsWithoutProcessorsTakeTheSamplersToken) {
  // Greedy rows without logits processors take the backend's argmax (no logits copy); asking for
  // logprobs sends a row through the sampler's greedy draw instead: the same tokens, all rows one
  // way, the other, or mixed in one batch.
  const auto reqs = random_requests(16, 8, /*sampled=*/false);
  auto with_logprobs = reqs, mixed = reqs;
  for (auto& r : with_logprobs) r.sampling.logprobs = true;
  for (size_t i = 0; i < mixed.size(); i += 2) mixed[i].sampling.logprobs = true;
  auto e1 = make({16, 64, 16 << 20, 16});
  auto e2 = make({16, 64, 16 << 20, 16});
  auto e3 = make({16, 64, 16 << 20, 16});
  const auto argmax = run(*e1, reqs);
  EXPECT_EQ(run(*e2, with_logprobs), argmax);
  EXPECT_EQ(run(*e3, mixed), argmax);
}

TEST_F(EngineTest, SeededSamplingIsTheSameAloneAndBatched) {
  const auto reqs = random_requests(16, 6, /*sampled=*/true);
  const auto alone = run_each_alone(reqs);
  auto e = make({16, 64, 16 << 20, 16});
  EXPECT_EQ(run(*e, reqs), alone);
}

TEST_F(EngineTest, PreemptionUnderATinyBudgetCompletesWithTheSameTokens) {
  auto reqs = random_requests(12, 7, /*sampled=*/true);
  for (auto& r : reqs) r.max_tokens = 12;
  const auto alone = run_each_alone(reqs);
  // Room for 4 sequence slots but only a few pages: sequences outgrow the pool and are preempted.
  EngineOptions o{4, 64, 0, 4};
  o.prefix_cache_snapshots = 0;  // tests/unit/engine/prefix_cache_test.cc preempts with it on
  auto probe = plan_state_pool(model_->config(), 1 << 30, 4, 4);
  ASSERT_TRUE(probe.has_value());
  // About 90 tokens for 4 sequences of up to 52 tokens (40 prompt + 12 generated).
  o.kv_cache_bytes = 4 * probe->bytes_per_sequence + 2 * 4 * 96 * 4 +
                     static_cast<int64_t>(90 * probe->bytes_per_token);
  auto e = make(o);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(run(*e, reqs), alone);
  EXPECT_GT(e->stats().num_preemptions, 0) << "the budget was not tight enough to preempt";
}

TEST_F(EngineTest, CancellationFreesAllState) {
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async scheduling" : "sync");
    EngineOptions o{4, 16, 8 << 20, 16};
    o.async_scheduling = async;
    auto e = make(o);
    auto reqs = random_requests(4, 8, false);
    for (auto& r : reqs) {
      r.max_tokens = 20;
      ASSERT_TRUE(e->add_request(r).ok());
    }
    e->step();  // some are mid-prefill, some running (async: that forward is still running)
    e->cancel(0);
    EXPECT_TRUE(e->abort_request(1));
    bool saw_cancel = false;
    for (const auto& u : e->step()) {
      saw_cancel |= u.id == 0 && u.finish == FinishReason::kCancelled;
      EXPECT_TRUE(u.id != 1 || u.new_tokens.empty()) << "a token after abort";
    }
    EXPECT_TRUE(saw_cancel);
    EXPECT_TRUE(e->abort_request(2));
    EXPECT_TRUE(e->abort_request(3));
    // Async: a forward using 2 and 3 may still run; the next step frees them and reports nothing.
    for (const auto& u : e->step()) EXPECT_TRUE(u.new_tokens.empty()) << "request " << u.id;
    EXPECT_FALSE(e->has_unfinished());
    // All four slots and all pages are free again: four max-length requests run to the end.
    for (auto& r : reqs) r.id += 10;
    EXPECT_EQ(run(*e, reqs).size(), 4u);
  }
}

TEST_F(EngineTest, AsyncSchedulingGivesTheSameTokensAndOverlapsTheCaller) {
  const auto reqs = random_requests(24, 9, /*sampled=*/true);
  EngineOptions o{8, 48, 16 << 20, 16};
  o.pending_tokens = false;  // the worker thread's path (pending tokens issue on the caller's)
  o.async_scheduling = false;
  auto sync = make(o);
  o.async_scheduling = true;
  auto async = make(o);
  EXPECT_EQ(run(*async, reqs), run(*sync, reqs));
  EXPECT_GT(async->stats().overlapped_s, 0.0);
  EXPECT_EQ(sync->stats().overlapped_s, 0.0);
}

TEST_F(EngineTest, RejectsBadRequestsAsValues) {
  auto e = make({4, 16, 8 << 20, 16});
  Request r;
  r.id = 1;
  EXPECT_EQ(e->add_request(r).code(), StatusCode::kInvalidArgument);  // empty prompt
  r.prompt = {5, 99999};
  EXPECT_EQ(e->add_request(r).code(), StatusCode::kInvalidArgument);
  r.prompt = {5};
  r.sampling.logit_bias = {{600, 1.0f}};
  EXPECT_EQ(e->add_request(r).code(), StatusCode::kInvalidArgument);
  r.sampling.logit_bias = {};
  r.max_tokens = 1 << 20;
  EXPECT_EQ(e->add_request(r).code(), StatusCode::kInvalidArgument);
  r.max_tokens = 2;
  e->submit(r);
  e->submit(r);  // the same id twice: the second is an error update
  int errors = 0;
  while (e->has_unfinished()) {
    for (const auto& u : e->step()) errors += u.finish == FinishReason::kError;
  }
  EXPECT_EQ(errors, 1);
}

TEST_F(EngineTest, MemoryPlanFitsTheBudgetAndRejectsATinyOne) {
  auto e = make({8, 64, 6 << 20, 16});
  EXPECT_LE(e->state_bytes(), 6 << 20);
  EXPECT_GT(e->memory_plan().pool.max_tokens, 1000);
  auto tiny = Engine::create(*model_, {8, 64, 1000, 16});
  ASSERT_FALSE(tiny.has_value());
  EXPECT_NE(tiny.status().message().find("--kv-cache-bytes"), std::string::npos);
}

}  // namespace
}  // namespace di::engine
