// The engine: owns the state pool, the scheduler and the sampler, and turns one call to step()
// into schedule -> forward -> sample -> postprocess (issue #4 items 1 and 3). Token ids only:
// text, chat rendering and stop strings belong to the api layer, which may finish a request
// early with finish_request().
//
// Threading: one owner thread calls every method except submit() and cancel(), which any thread
// may call; they go through engine/queue.h and take effect at the start of the next step.
//
// Asynchronous scheduling (EngineOptions::async_scheduling, issue #4 item 2): step() samples the
// forward launched by the previous call, schedules and launches the next forward on a worker
// thread, and returns the finished step's updates while that forward runs, so the caller's work
// on them (detokenization, stop strings, streaming, result files) overlaps the forward. A
// request finished by the caller while its next forward runs has that step's token dropped;
// its state is freed when the forward returns. Tokens are the same with and without it.
//
// Pending tokens (EngineOptions::pending_tokens, engine_pending.cc): when no row of a step needs
// its logits on the host, the step is issued on the owner thread with its tokens left on the
// backend (model.h, LogitsSelection::defer). The next step() then schedules the following step
// with a placeholder for each of those tokens, issues it (its decode rows embed and hash the
// tokens where they are), and only then waits for the tokens: the device runs step k + 1 while
// step k's tokens come back and the caller works on them, so it never waits for the host between
// decode steps. Requests whose next token needs the host (a grammar, penalties, logprobs) or that
// end by length at step k make step() wait for step k first. Tokens are the same either way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "engine/memory_plan.h"
#include "engine/prefix_cache.h"
#include "engine/queue.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace di::engine {

struct EngineOptions {
  int max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t kv_cache_bytes = int64_t{256} << 20;  // the state pool's byte budget
  int entries_per_page = 16;
  // SWA bounded replay (spec §1.2): prefill runs the layers after the last KV source only on the
  // last `replay_tail` prompt tokens. -1: the default, window + DSpark block (spec: 128 + 5);
  // 0: exact full prefill. The replay point depends on the prompt alone, so a request's tokens do
  // not depend on batching, chunking or preemption.
  int64_t replay_tail = -1;
  // Prefix caching (engine/prefix_cache.h): window snapshots kept; 0: off; -1: 2 * max_num_seqs
  // or as many as a quarter of kv_cache_bytes holds, whichever is fewer.
  int prefix_cache_snapshots = -1;
  bool async_scheduling = true;
  // Steps whose tokens are all chosen on the backend keep them there for the next step (above).
  bool pending_tokens = true;
  // Requests with temperature, penalties, bias or a grammar (not logprobs) sample on the backend
  // (Ops::sample_rows, the host sampler's token bitwise) instead of copying their logits.
  bool backend_sampling = true;
};

// Wall time per phase, summed over steps.
struct EngineStats {
  int64_t num_steps = 0;
  int64_t num_prefill_tokens = 0;  // prompt (and recompute) tokens fed to the model
  int64_t num_generated_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_pending_steps = 0;  // issued before the previous step's tokens reached the host
  int64_t prefix_cache_query_tokens = 0;  // tokens of admitted sequences looked up
  int64_t prefix_cache_hit_tokens = 0;    // of which restored from the prefix cache
  double schedule_s = 0;
  double forward_s = 0;
  double sample_s = 0;
  // Asynchronous scheduling: the caller's time between a launch and the next step() (its work on
  // the updates), the part of it hidden behind the forward, and the time step() then waited.
  double caller_s = 0;
  double overlapped_s = 0;
  double wait_s = 0;
};

class Engine {
 public:
  // `model` must outlive the engine.
  static Expected<std::unique_ptr<Engine>> create(model::Model& model, const EngineOptions& opts);
  ~Engine();

  // Owner thread. Validates (ids in the vocabulary, lengths within max_seq_len and the pool's
  // capacity, sampling ranges); a request id must not be in use.
  Status add_request(Request request);
  // Owner thread. Cancels wherever the request is and frees its state; false if unknown.
  bool abort_request(RequestId id);
  // Owner thread. Ends a request as finished (the api layer matched a stop string).
  bool finish_request(RequestId id) { return abort_request(id); }

  // Any thread. Applied at the start of the next step; invalid requests come back as kError
  // updates from that step.
  void submit(Request request) { inbox_.push(Message{std::move(request)}); }
  void cancel(RequestId id) { inbox_.push(Message{id}); }

  // Owner thread. One scheduling step; an empty result when there is nothing to do.
  std::vector<RequestUpdate> step();
  bool has_unfinished() const {
    return !scheduler_->empty() || !inbox_.empty() || inflight_ != nullptr;
  }

  const MemoryPlan& memory_plan() const { return plan_; }
  int64_t state_bytes() const { return pool_->bytes(); }
  const EngineStats& stats() const { return stats_; }
  void reset_stats() { stats_ = EngineStats(); }  // owner thread (a benchmark after its warm-up)
  // Null when prefix caching is off.
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
  size_t num_running() const { return scheduler_->num_running(); }
  size_t num_waiting() const { return scheduler_->num_waiting(); }
  const model::ModelConfig& config() const { return model_.config(); }

 private:
  class PoolBudget;
  using Message = std::variant<Request, RequestId>;  // add, or cancel

  Engine(model::Model& model, EngineOptions opts, MemoryPlan plan, model::StatePool pool);
  void apply_inbox(std::vector<RequestUpdate>& updates);
  struct InFlight;
  // Builds the forward's inputs for `plan` into ctx_ / logits_rows_; a chunk whose token is a
  // placeholder of `prev` (speculated) reads it from prev's selection on the backend.
  void prepare_forward(const StepPlan& plan, InFlight* prev = nullptr);
  // engine_pending.cc: issues the prepared forward with its tokens left on the backend.
  std::unique_ptr<InFlight> issue_deferred(StepPlan plan);
  // Whether the prepared forward may leave its tokens on the backend (no row needs its logits).
  bool can_defer() const;
  // Before step k + 1 is scheduled: records step k as done and gives each of its sampling
  // sequences a placeholder token; false (nothing changed) when some sequence's next token needs
  // step k's first (a grammar, penalties, the end by length) or step k failed.
  bool speculate(InFlight& f);
  // Waits for a deferred step's tokens and completes it: the placeholders (if speculated) or new
  // tokens, the updates and finishes. `next`: the step issued since, whose pending rows the
  // tokens now resolve in the model's state.
  void finish_deferred(InFlight& f, const InFlight* next, std::vector<RequestUpdate>& updates);
  model::SequenceState& state_of(RequestId id);  // an admitted sequence's model state
  // An error update for `id` (when still live), then abort_request (deferred while it runs).
  void fail_one(RequestId id, const std::string& why, std::vector<RequestUpdate>& updates);
  // After `seq.tokens` took its new token `r`: the update and the finish checks.
  void report_token(Sequence& seq, SampleResult r, std::vector<RequestUpdate>& updates);
  // After the forward of `plan` returned `s`: bookkeeping, prefix publishing, sampling.
  void complete_step(const StepPlan& plan, const Status& s, std::vector<RequestUpdate>& updates);
  void wait_inflight(std::vector<RequestUpdate>& updates);
  void publish_prefixes(const StepPlan& plan);
  void fail_requests(const std::vector<RequestId>& ids,
                     const std::string& why,
                     std::vector<RequestUpdate>& updates);

  model::Model& model_;
  EngineOptions opts_;
  int64_t replay_tail_ = 0;  // resolved EngineOptions::replay_tail
  MemoryPlan plan_;
  std::unique_ptr<model::StatePool> pool_;
  std::unique_ptr<PrefixCache> prefix_cache_;
  std::unique_ptr<PoolBudget> budget_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<RequestId, Request> requests_;  // live requests: sampling parameters, limits
  Sampler sampler_;
  Queue<Message> inbox_;
  EngineStats stats_;
  std::unique_ptr<InFlight> inflight_;    // the forward running on the worker thread, if any
  std::vector<RequestId> late_finishes_;  // finished by the caller while their forward ran
  model::ForwardContext ctx_;
  double forward_seconds_ = 0;  // written by the worker, read after its future is ready
  // Reused across steps so a decode step allocates nothing here once warm.
  std::vector<int64_t> logits_rows_;
  std::vector<float> logits_;           // the rows that sample with processors (full), in order
  model::LogitsSelection selection_;    // which rows are full; every row's argmax
  std::vector<int32_t> sample_counts_;  // [vocab] scratch of the backend rows' penalty lists
  // Backend rows' grammar masks, written by selection_.fill_masks once the forward is issued:
  // (constraint, offset in selection_.masks).
  std::vector<std::pair<TokenConstraint*, int64_t>> pending_masks_;
};

}  // namespace di::engine
