// The scheduler: which sequences run in the next forward and how many tokens each feeds. Plain
// data plus one policy function (schedule) so it can be read in one sitting and unit-tested with
// a fake memory (house style §4.12 #10). Policy, per step:
//   1. running sequences in priority order: decode steps first, then their prefill chunks, all
//      inside the token budget (max_num_batched_tokens);
//   2. waiting sequences in (priority, arrival) order are admitted while the budget, the sequence
//      limit (max_num_seqs) and the state pool allow; a long prompt is split into chunks;
//   3. when the state pool cannot grow a running sequence, the lowest-priority newest running
//      sequence is preempted by recompute: its state is released and it waits again with its
//      generated tokens kept, so re-admission prefills prompt + output and continues exactly.
// Not thread-safe: the engine's owner thread is the only caller.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "engine/request.h"

namespace di::engine {

struct Sequence;

// The memory the scheduler asks for; the engine implements it over model::StatePool.
class StateBudget {
 public:
  virtual ~StateBudget() = default;
  // Takes a sequence slot for `seq`; false when every slot is taken. May restore a cached prefix
  // (setting seq.num_computed, less than seq.tokens.size()) and set seq.chunk_ends.
  virtual bool try_admit(Sequence& seq) = 0;
  // Makes room for `num_tokens` more positions of `id`; false, with nothing changed, when full.
  virtual bool try_reserve(RequestId id, int64_t num_tokens) = 0;
  // Frees everything `id` holds (slot and pages). Safe to call for an id holding nothing.
  virtual void release(RequestId id) = 0;
  // True when waiting a little serves `seq` better than admitting it now: a running sequence is
  // about to make a longer prefix of it restorable (the prefix cache), so its prefill need not
  // be computed twice. The scheduler then admits the sequences behind it.
  virtual bool should_wait(const Sequence& /*seq*/, std::span<Sequence* const> /*running*/) {
    return false;
  }
};

struct SchedulerOptions {
  int max_num_seqs = 64;                 // sequences running at once
  int64_t max_num_batched_tokens = 512;  // tokens fed to one forward
};

// A Sequence::tokens entry whose id the engine learns later: the last token of a sequence whose
// step is still running with its tokens on the backend (engine.h, pending tokens). The scheduler
// counts it like any token; the engine's forward reads it from the backend.
inline constexpr int32_t kPlaceholderToken = -1;

// The scheduler's view of one sequence.
struct Sequence {
  RequestId id = 0;
  int priority = 0;             // lower first
  uint64_t arrival = 0;         // assigned by add(); FCFS tie-break
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed = 0;  // leading tokens whose state the model holds
  // Ascending positions where a prefill chunk must end (the prefix cache snapshots the windows
  // there); set at admission.
  std::vector<int64_t> chunk_ends;
  bool running = false;
  // Running, with its last step's token not known yet and no placeholder for it (it ends with
  // that token): schedule() leaves it out until the engine appends the token.
  bool awaiting_token = false;
  int num_preemptions = 0;
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t begin = 0;  // first token index (== seq->num_computed when scheduled)
  int64_t num_tokens = 0;
  bool samples = false;  // reaches the end of seq->tokens: its last row's logits pick a token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  std::vector<RequestId> preempted;    // released this step, waiting again
  std::vector<RequestId> failed;       // cannot fit the state pool even alone; removed
  int64_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, StateBudget& budget);

  // Queues a sequence (num_computed must be 0 and tokens non-empty).
  void add(Sequence seq);
  // Removes a sequence wherever it is and frees its state; false if unknown.
  bool remove(RequestId id);
  Sequence* find(RequestId id);

  StepPlan schedule();
  // Records that the forward processed the plan's chunks.
  void on_step_done(const StepPlan& plan);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool empty() const { return seqs_.empty(); }
  const SchedulerOptions& options() const { return options_; }

 private:
  using Key = std::tuple<int, uint64_t, RequestId>;  // (priority, arrival, id)
  static Key key_of(const Sequence& s) { return {s.priority, s.arrival, s.id}; }

  // Feeds `seq` min(remaining, budget) tokens, preempting from the back of running_ until the
  // pool has room. False if `seq` itself was preempted or failed.
  bool schedule_running(Sequence& seq, int64_t& budget, StepPlan& plan);
  void admit_waiting(int64_t& budget, StepPlan& plan);
  void preempt(Sequence& victim, StepPlan& plan, int64_t& budget);
  void drop(Sequence& seq, StepPlan& plan);
  // Tokens `seq` may feed now: its remaining tokens, cut at the budget and the next chunk end.
  static int64_t chunk_size(const Sequence& seq, int64_t budget);

  SchedulerOptions options_;
  StateBudget& budget_;
  uint64_t next_arrival_ = 0;
  std::map<RequestId, Sequence> seqs_;  // node-based: Sequence* stay valid
  std::set<Key> waiting_;
  std::vector<Sequence*> running_;  // sorted by key at the start of each schedule()
};

}  // namespace di::engine
