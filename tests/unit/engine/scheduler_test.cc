// Scheduler policy against a fake state pool that counts slots and tokens: the token budget,
// chunked prefill after decodes, priorities and FCFS, preemption by recompute (newest and
// lowest priority first, nothing lost), failure of what can never fit, and cancellation.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

namespace di::engine {
namespace {

// `slots` sequences and `tokens` positions in all; a sequence's reservation is its token count.
class FakeBudget : public StateBudget {
 public:
  FakeBudget(int slots, int64_t tokens) : slots_(slots), tokens_(tokens) {}
  bool try_admit(Sequence& seq) override {
    const RequestId id = seq.id;
    if (static_cast<int>(held_.size()) >= slots_) return false;
    held_[id] = 0;
    return true;
  }
  bool try_reserve(RequestId id, int64_t n) override {
    EXPECT_TRUE(held_.contains(id)) << "reserve for a sequence without a slot";
    if (used() + n > tokens_) return false;
    held_[id] += n;
    return true;
  }
  void release(RequestId id) override { held_.erase(id); }
  int64_t used() const {
    int64_t u = 0;
    for (auto& [id, n] : held_) u += n;
    return u;
  }
  size_t num_held() const { return held_.size(); }

 private:
  int slots_;
  int64_t tokens_;
  std::map<RequestId, int64_t> held_;
};

Sequence make_seq(RequestId id, int len, int priority = 0) {
  Sequence s;
  s.id = id;
  s.priority = priority;
  s.tokens.assign(static_cast<size_t>(len), 7);
  s.num_prompt_tokens = len;
  return s;
}

// Runs the plan as the engine would: advance, and append one token to sampling chunks.
void finish_step(Scheduler& s, const StepPlan& plan) {
  s.on_step_done(plan);
  for (const auto& c : plan.chunks) {
    if (c.samples) c.seq->tokens.push_back(9);
  }
}

std::map<RequestId, int64_t> chunk_sizes(const StepPlan& p) {
  std::map<RequestId, int64_t> m;
  for (const auto& c : p.chunks) m[c.seq->id] = c.num_tokens;
  return m;
}

TEST(Scheduler, ChunksLongPromptsWithinTheTokenBudget) {
  FakeBudget b(8, 10000);
  Scheduler s({8, 16}, b);
  s.add(make_seq(1, 40));
  std::vector<int64_t> sizes;
  for (int i = 0; i < 3; ++i) {
    StepPlan p = s.schedule();
    ASSERT_EQ(p.chunks.size(), 1u);
    EXPECT_EQ(p.chunks[0].begin, 16 * i);
    sizes.push_back(p.chunks[0].num_tokens);
    EXPECT_EQ(p.chunks[0].samples, i == 2);
    finish_step(s, p);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 8}));
  StepPlan p = s.schedule();  // now a decode step
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].num_tokens, 1);
  EXPECT_TRUE(p.chunks[0].samples);
}

TEST(Scheduler, DecodesComeFirstAndPrefillFillsTheRest) {
  FakeBudget b(8, 10000);
  Scheduler s({8, 10}, b);
  s.add(make_seq(1, 3));
  s.add(make_seq(2, 4));
  finish_step(s, s.schedule());  // both prefilled whole (7 <= 10)
  s.add(make_seq(3, 30));
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.chunks[0].num_tokens, 1);
  EXPECT_EQ(p.chunks[1].num_tokens, 1);
  EXPECT_EQ(p.chunks[2].seq->id, 3);
  EXPECT_EQ(p.chunks[2].num_tokens, 8);  // 10 - two decodes
  EXPECT_EQ(p.num_tokens, 10);
}

TEST(Scheduler, RespectsMaxNumSeqs) {
  FakeBudget b(8, 10000);
  Scheduler s({2, 100}, b);
  for (int i = 1; i <= 4; ++i) s.add(make_seq(i, 2));
  StepPlan p = s.schedule();
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 2}, {2, 2}}));
  EXPECT_EQ(s.num_waiting(), 2u);
}

TEST(Scheduler, PriorityThenArrivalOrder) {
  FakeBudget b(8, 10000);
  Scheduler s({1, 100}, b);
  s.add(make_seq(1, 2, /*priority=*/5));
  s.add(make_seq(2, 2, /*priority=*/0));
  s.add(make_seq(3, 2, /*priority=*/0));
  std::vector<RequestId> order;
  while (!s.empty()) {
    StepPlan p = s.schedule();
    ASSERT_EQ(p.chunks.size(), 1u);
    const RequestId id = p.chunks[0].seq->id;
    if (order.empty() || order.back() != id) order.push_back(id);
    finish_step(s, p);
    s.remove(id);  // finished after its first token
  }
  EXPECT_EQ(order, (std::vector<RequestId>{2, 3, 1}));
}

TEST(Scheduler, PreemptsTheNewestLowestPriorityAndKeepsItsTokens) {
  FakeBudget b(8, 12);
  Scheduler s({8, 100}, b);
  s.add(make_seq(1, 5, /*priority=*/0));
  s.add(make_seq(2, 5, /*priority=*/1));
  finish_step(s, s.schedule());  // 10 of 12 tokens held; each has one generated token
  finish_step(s, s.schedule());  // 12 of 12
  ASSERT_EQ(b.used(), 12);
  StepPlan p = s.schedule();  // seq 1 needs one more: seq 2 must go
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{2}));
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{1, 1}}));
  const Sequence* two = s.find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_FALSE(two->running);
  EXPECT_EQ(two->num_computed, 0);
  EXPECT_EQ(two->tokens.size(), 7u);  // prompt + both generated tokens, recomputed later
  finish_step(s, p);
  s.remove(1);
  p = s.schedule();  // seq 2 comes back with all 7 tokens as one prefill chunk
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{2, 7}}));
  EXPECT_TRUE(p.chunks[0].samples);
}

TEST(Scheduler, FailsWhatCanNeverFitAndKeepsTheRest) {
  FakeBudget b(8, 6);
  Scheduler s({8, 100}, b);
  s.add(make_seq(1, 9));
  s.add(make_seq(2, 3));
  StepPlan p = s.schedule();
  EXPECT_EQ(p.failed, (std::vector<RequestId>{1}));
  EXPECT_EQ(chunk_sizes(p), (std::map<RequestId, int64_t>{{2, 3}}));
  finish_step(s, p);
  // A running sequence that outgrows the whole pool alone fails too.
  for (int i = 0; i < 3; ++i) finish_step(s, s.schedule());
  p = s.schedule();
  EXPECT_EQ(p.failed, (std::vector<RequestId>{2}));
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(b.num_held(), 0u);
}

TEST(Scheduler, CancellationFreesStateAnywhere) {
  FakeBudget b(8, 1000);
  Scheduler s({8, 4}, b);
  s.add(make_seq(1, 10));
  s.add(make_seq(2, 10));
  finish_step(s, s.schedule());  // 1 is mid-prefill, 2 waits
  EXPECT_EQ(b.num_held(), 1u);
  EXPECT_TRUE(s.remove(1));
  EXPECT_TRUE(s.remove(2));
  EXPECT_FALSE(s.remove(3));
  EXPECT_EQ(b.num_held(), 0u);
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.schedule().chunks.empty());
}

TEST(Scheduler, NoAdmissionInAStepThatPreempted) {
  FakeBudget b(8, 4);
  Scheduler s({8, 100}, b);
  s.add(make_seq(1, 2));
  s.add(make_seq(2, 2));
  finish_step(s, s.schedule());
  s.add(make_seq(3, 1));
  StepPlan p = s.schedule();
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{2}));
  for (const auto& c : p.chunks) EXPECT_NE(c.seq->id, 3);
}

}  // namespace
}  // namespace di::engine
