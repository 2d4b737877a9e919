// Prefix caching on the golden v41-mini checkpoint (issue #4 item 4): requests that share a
// prefix (a common header, multi-turn chat re-sending its history, a preempted sequence coming
// back) hit the cache, and every token and logprob is bitwise what the same requests give with
// the cache off, in exact prefill and with SWA bounded replay. Eviction under a small budget
// keeps everything correct.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine_fixture.h"

namespace di::engine {
namespace {

// Tokens and logprobs bit patterns (chosen and top-5) of one finished request.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> logprob_bits;
  bool operator==(const Trace&) const = default;
};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

class PrefixCacheTest : public EngineTest {
 protected:
  static Trace run_one(Engine& e, Request r) {
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 5;
    Trace t;
    EXPECT_TRUE(e.add_request(r).ok());
    while (e.has_unfinished()) {
      for (const RequestUpdate& u : e.step()) {
        EXPECT_NE(u.finish, FinishReason::kError) << u.error;
        for (const auto& ev : u.new_tokens) {
          t.tokens.push_back(ev.token);
          t.logprob_bits.push_back(bits(ev.logprobs.logprob));
          for (const auto& [id, lp] : ev.logprobs.top) {
            t.logprob_bits.push_back(static_cast<uint32_t>(id));
            t.logprob_bits.push_back(bits(lp));
          }
        }
      }
    }
    return t;
  }

  static std::vector<int32_t> random_tokens(std::mt19937& rng, int n) {
    std::uniform_int_distribution<int32_t> tok(3, 511);
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(tok(rng));
    return v;
  }

  // A conversation-like workload run one request at a time: requests sharing a 70-token header
  // with distinct tails, then three "turns" where each prompt is the previous prompt, its reply
  // and new tokens. Returns every request's trace, in order.
  static std::vector<Trace> workload(Engine& e, uint32_t seed) {
    std::mt19937 rng(seed);
    const auto header = random_tokens(rng, 70);
    std::vector<Trace> out;
    RequestId id = 0;
    for (int i = 0; i < 3; ++i) {
      Request r;
      r.id = id++;
      r.prompt = header;
      const auto tail = random_tokens(rng, 5 + 7 * i);
      r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
      r.max_tokens = 6;
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 77 + static_cast<uint64_t>(i);
      out.push_back(run_one(e, r));
    }
    std::vector<int32_t> history = random_tokens(rng, 80);
    for (int turn = 0; turn < 3; ++turn) {
      Request r;
      r.id = id++;
      r.prompt = history;
      r.max_tokens = 20;
      out.push_back(run_one(e, r));
      history.insert(history.end(), out.back().tokens.begin(), out.back().tokens.end());
      const auto next = random_tokens(rng, 9);
      history.insert(history.end(), next.begin(), next.end());
    }
    return out;
  }
};

TEST_F(PrefixCacheTest, HitsAreBitwiseEqualToNoCacheInExactAndBoundedReplayModes) {
  for (const int64_t replay_tail : {int64_t{0}, int64_t{-1}}) {
    SCOPED_TRACE("replay_tail " + std::to_string(replay_tail));
    EngineOptions off{4, 64, 8 << 20, 16};
    off.replay_tail = replay_tail;
    off.prefix_cache_snapshots = 0;
    EngineOptions on = off;
    on.prefix_cache_snapshots = 16;
    auto e_off = make(off);
    auto e_on = make(on);
    ASSERT_NE(e_off, nullptr);
    ASSERT_NE(e_on, nullptr);
    EXPECT_EQ(e_off->prefix_cache(), nullptr);
    const auto expected = workload(*e_off, 11);
    const auto got = workload(*e_on, 11);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
    const PrefixCacheStats& st = e_on->prefix_cache()->stats();
    // Requests 1 and 2 hit the header, turns 1 and 2 their history.
    EXPECT_GE(st.num_hits, 4) << "hit tokens " << st.hit_tokens;
    EXPECT_GT(st.hit_tokens, 0);
    EXPECT_EQ(e_on->stats().prefix_cache_hit_tokens, st.hit_tokens);
  }
}

TEST_F(PrefixCacheTest, ConcurrentSharedPrefixesMatchEachRunAlone) {
  std::mt19937 rng(3);
  const auto header = random_tokens(rng, 100);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.id = i;
    r.prompt = header;
    const auto tail = random_tokens(rng, 1 + i);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 5;
    reqs.push_back(r);
  }
  const auto alone = run_each_alone(reqs, /*replay_tail=*/0);
  // Staggered arrivals: later requests find the header's blocks published by earlier ones.
  EngineOptions o{4, 40, 8 << 20, 16};
  o.replay_tail = 0;
  auto e = make(o);
  std::map<RequestId, std::vector<int32_t>> got;
  size_t next = 0;
  while (next < reqs.size() || e->has_unfinished()) {
    if (next < reqs.size()) {
      ASSERT_TRUE(e->add_request(reqs[next++]).ok());
    }
    for (const RequestUpdate& u : e->step()) {
      ASSERT_NE(u.finish, FinishReason::kError) << u.error;
      for (const auto& t : u.new_tokens) got[u.id].push_back(t.token);
    }
  }
  EXPECT_EQ(got, alone);
  EXPECT_GT(e->prefix_cache()->stats().num_hits, 0);
}

TEST_F(PrefixCacheTest, SimultaneousSharedPrefixesPrefillTheHeaderOnce) {
  std::mt19937 rng(4);
  const auto header = random_tokens(rng, 100);
  std::vector<Request> reqs;
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.id = i;
    r.prompt = header;
    const auto tail = random_tokens(rng, 1 + i);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 3;
    prompt_tokens += static_cast<int64_t>(r.prompt.size());
    reqs.push_back(r);
  }
  const auto alone = run_each_alone(reqs, /*replay_tail=*/0);
  // All arrive at once: the others wait for the first one's header snapshot (at 96, the last
  // block boundary inside the shared 100 tokens) instead of all computing it.
  EngineOptions o{16, 512, 8 << 20, 16};
  o.replay_tail = 0;
  auto e = make(o);
  EXPECT_EQ(run(*e, reqs), alone);
  const PrefixCacheStats& st = e->prefix_cache()->stats();
  EXPECT_EQ(st.num_hits, 11);
  EXPECT_EQ(st.hit_tokens, 11 * 96);
  EXPECT_EQ(e->stats().num_prefill_tokens, prompt_tokens - 11 * 96);
}

TEST_F(PrefixCacheTest, PreemptionAndEvictionUnderATinyBudgetKeepTheTokens) {
  auto reqs = random_requests(12, 7, /*sampled=*/true);
  for (auto& r : reqs) r.max_tokens = 40;  // long enough to pass a block boundary in decode
  const auto alone = run_each_alone(reqs, /*replay_tail=*/0);
  EngineOptions o{4, 64, 0, 4};
  o.replay_tail = 0;
  o.prefix_cache_snapshots = 4;
  auto probe = plan_state_pool(model_->config(), 1 << 30, 4, 4, 4);
  ASSERT_TRUE(probe.has_value());
  // About 200 tokens of pages for 4 sequences of up to 80 tokens, and the 4 snapshots.
  o.kv_cache_bytes = 4 * probe->bytes_per_sequence + probe->snapshot_bytes + 2 * 4 * 96 * 4 +
                     static_cast<int64_t>(200 * probe->bytes_per_token);
  auto e = make(o);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(run(*e, reqs), alone);
  EXPECT_GT(e->stats().num_preemptions, 0) << "the budget was not tight enough to preempt";
  EXPECT_GT(e->prefix_cache()->stats().evicted_blocks, 0) << "nothing was evicted";
  EXPECT_GT(e->prefix_cache()->stats().num_hits, 0) << "no preempted sequence hit its blocks";
}

TEST_F(PrefixCacheTest, ChoicesOfOnePromptPrefillItOnce) {
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  const auto prompt = random_tokens(rng, 150);
  for (int c = 0; c < 4; ++c) {
    Request r;
    r.id = c;
    r.prompt = prompt;
    r.max_tokens = 4;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 9;
    r.stream = static_cast<uint64_t>(c);
    reqs.push_back(r);
  }
  const auto alone = run_each_alone(reqs);
  auto e = make({8, 512, 8 << 20, 16});
  EXPECT_EQ(run(*e, reqs), alone);
  const PrefixCacheStats& st = e->prefix_cache()->stats();
  EXPECT_EQ(st.num_hits, 3);
  // The replay point is 150 - 13: the choices restore 128 tokens and compute 22.
  EXPECT_EQ(st.hit_tokens, 3 * 128);
  EXPECT_EQ(e->stats().num_prefill_tokens, 150 + 3 * 22);
}

TEST_F(PrefixCacheTest, RejectsANegativeSnapshotCount) {
  EngineOptions o{4, 64, 8 << 20, 16};
  o.prefix_cache_snapshots = -2;
  auto e = Engine::create(*model_, o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("--prefix-cache-snapshots"), std::string::npos);
}

}  // namespace
}  // namespace di::engine
