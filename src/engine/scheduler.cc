#include "engine/scheduler.h"

#include <algorithm>

#include "util/check.h"

namespace di::engine {

namespace {

// Takes `seq`'s chunk (if any) back out of the plan, refunding its tokens.
void unschedule(Sequence& seq, StepPlan& plan, int64_t& budget) {
  for (auto it = plan.chunks.begin(); it != plan.chunks.end(); ++it) {
    if (it->seq == &seq) {
      budget += it->num_tokens;
      plan.num_tokens -= it->num_tokens;
      plan.chunks.erase(it);
      return;
    }
  }
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, StateBudget& budget)
    : options_(options), budget_(budget) {}

void Scheduler::add(Sequence seq) {
  DI_CHECK(!seq.tokens.empty() && seq.num_computed == 0);
  DI_CHECK(!seqs_.contains(seq.id));
  seq.arrival = next_arrival_++;
  seq.running = false;
  const RequestId id = seq.id;
  auto [it, inserted] = seqs_.emplace(id, std::move(seq));
  waiting_.insert(key_of(it->second));
}

Sequence* Scheduler::find(RequestId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

bool Scheduler::remove(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  Sequence& s = it->second;
  if (s.running) {
    running_.erase(std::find(running_.begin(), running_.end(), &s));
  } else {
    waiting_.erase(key_of(s));
  }
  budget_.release(id);
  seqs_.erase(it);
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t budget = options_.max_num_batched_tokens;
  std::sort(running_.begin(), running_.end(),
            [](const Sequence* a, const Sequence* b) { return key_of(*a) < key_of(*b); });
  // Decode steps first (one token each, latency-critical), then running prefills' next chunks.
  // A preemption only removes sequences from the back, behind index i, so i stays valid.
  for (const bool decode_pass : {true, false}) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i];
      if (s->awaiting_token) continue;
      const int64_t remaining = static_cast<int64_t>(s->tokens.size()) - s->num_computed;
      DI_CHECK(remaining > 0);
      if ((remaining == 1) != decode_pass) continue;
      schedule_running(*s, budget, plan);
    }
  }
  // Admitting right after a preemption would only hand the freed pages to a newcomer and
  // preempt again next step.
  if (plan.preempted.empty()) admit_waiting(budget, plan);
  return plan;
}

int64_t Scheduler::chunk_size(const Sequence& seq, int64_t budget) {
  int64_t n = std::min(static_cast<int64_t>(seq.tokens.size()) - seq.num_computed, budget);
  auto next = std::upper_bound(seq.chunk_ends.begin(), seq.chunk_ends.end(), seq.num_computed);
  if (next != seq.chunk_ends.end()) n = std::min(n, *next - seq.num_computed);
  return n;
}

bool Scheduler::schedule_running(Sequence& seq, int64_t& budget, StepPlan& plan) {
  const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.num_computed;
  const int64_t n = chunk_size(seq, budget);
  while (!budget_.try_reserve(seq.id, n)) {
    Sequence* victim = running_.back();
    if (victim == &seq) {
      // Alone in the pool and still no room: it can never run.
      if (running_.size() == 1) {
        drop(seq, plan);
      } else {
        preempt(seq, plan, budget);
      }
      return false;
    }
    preempt(*victim, plan, budget);
  }
  plan.chunks.push_back({&seq, seq.num_computed, n, n == remaining});
  plan.num_tokens += n;
  budget -= n;
  return true;
}

void Scheduler::admit_waiting(int64_t& budget, StepPlan& plan) {
  auto it = waiting_.begin();
  while (it != waiting_.end() && budget > 0 &&
         running_.size() < static_cast<size_t>(options_.max_num_seqs)) {
    Sequence& s = seqs_.at(std::get<2>(*it));
    if (budget_.should_wait(s, running_)) {
      ++it;
      continue;
    }
    if (!budget_.try_admit(s)) return;
    const int64_t len = static_cast<int64_t>(s.tokens.size());
    DI_CHECK(s.num_computed < len);
    const int64_t n = chunk_size(s, budget);
    if (!budget_.try_reserve(s.id, n)) {
      budget_.release(s.id);
      s.num_computed = 0;
      if (!running_.empty()) return;  // room comes back as running sequences finish
      // The pool is empty and the first chunk still does not fit: it never will.
      plan.failed.push_back(s.id);
      it = waiting_.erase(it);
      seqs_.erase(s.id);
      continue;
    }
    it = waiting_.erase(it);
    s.running = true;
    running_.push_back(&s);
    plan.chunks.push_back({&s, s.num_computed, n, s.num_computed + n == len});
    plan.num_tokens += n;
    budget -= n;
  }
}

void Scheduler::preempt(Sequence& victim, StepPlan& plan, int64_t& budget) {
  unschedule(victim, plan, budget);
  budget_.release(victim.id);
  running_.erase(std::find(running_.begin(), running_.end(), &victim));
  victim.running = false;
  victim.num_computed = 0;  // recompute: prompt + generated tokens are prefilled again
  ++victim.num_preemptions;
  waiting_.insert(key_of(victim));
  plan.preempted.push_back(victim.id);
}

void Scheduler::drop(Sequence& seq, StepPlan& plan) {
  int64_t unused = 0;
  unschedule(seq, plan, unused);
  plan.failed.push_back(seq.id);
  remove(seq.id);
}

void Scheduler::on_step_done(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) c.seq->num_computed += c.num_tokens;
}

}  // namespace di::engine
