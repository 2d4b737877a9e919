#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "engine/device_sampling.h"
#include "engine/engine_in_flight.h"
#include "kernels/ref/sample_math.h"
#include "util/check.h"

namespace di::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

// StateBudget over the model's StatePool: one SequenceState per admitted request, restored from
// the prefix cache when it holds a prefix of the request's tokens.
class Engine::PoolBudget : public StateBudget {
 public:
  PoolBudget(model::StatePool& pool, PrefixCache* cache, int64_t replay_tail)
      : pool_(pool), cache_(cache), replay_tail_(replay_tail) {}

  bool try_admit(Sequence& seq) override {
    auto created = pool_.create_sequence();
    if (!created) return false;
    Live& live = states_[seq.id];
    live.state = std::move(created).value();
    live.cursor = PrefixCursor{};
    seq.chunk_ends.clear();
    if (!cache_) return true;
    const int64_t limit = restore_limit(seq);
    seq.num_computed = cache_->restore(seq.tokens, limit, replay_tail_ > 0, live.state);
    // Snapshot points: the last one a later hit on this prompt may use, and power-of-two
    // multiples of the block below it (shared system prompts, few-shot headers).
    const int64_t block = cache_->block_tokens();
    const int64_t last = limit / block * block;
    for (int64_t p = block; p < last; p *= 2) {
      if (p > seq.num_computed) seq.chunk_ends.push_back(p);
    }
    if (last > seq.num_computed) seq.chunk_ends.push_back(last);
    return true;
  }
  bool should_wait(const Sequence& seq, std::span<Sequence* const> running) override {
    if (!cache_) return false;
    const int64_t limit = restore_limit(seq);
    int64_t soon = 0;  // the longest prefix of `seq` a running prefill will snapshot
    for (const Sequence* r : running) {
      auto next = std::upper_bound(r->chunk_ends.begin(), r->chunk_ends.end(), r->num_computed);
      if (next == r->chunk_ends.end()) continue;
      const size_t n = static_cast<size_t>(
          std::min<int64_t>(limit, std::min(seq.tokens.size(), r->tokens.size())));
      const int64_t common =
          std::mismatch(seq.tokens.begin(), seq.tokens.begin() + static_cast<int64_t>(n),
                        r->tokens.begin())
              .first -
          seq.tokens.begin();
      for (auto p = next; p != r->chunk_ends.end() && *p <= common; ++p) soon = std::max(soon, *p);
    }
    return soon > 0 && soon > cache_->cached_prefix(seq.tokens, limit);
  }
  bool try_reserve(RequestId id, int64_t num_tokens) override {
    // Reserving here (forward's own reserve then finds the pages present) is what lets the
    // scheduler react to a full pool before the forward instead of failing inside it. Cached
    // blocks only the cache holds are given up first.
    model::SequenceState& seq = states_.at(id).state;
    while (!pool_.reserve(seq, num_tokens).ok()) {
      if (!cache_ || !cache_->evict_one()) return false;
    }
    return true;
  }
  void release(RequestId id) override {
    auto it = states_.find(id);
    if (it == states_.end()) return;
    pool_.release_sequence(it->second.state);
    states_.erase(it);
  }
  model::SequenceState& state(RequestId id) { return states_.at(id).state; }

  // After a forward: publishes `seq`'s new whole blocks and takes the snapshots it is due.
  void publish(const Sequence& seq) {
    if (!cache_) return;
    Live& live = states_.at(seq.id);
    const int64_t end = live.state.num_tokens;
    const bool prefill_point =
        std::binary_search(seq.chunk_ends.begin(), seq.chunk_ends.end(), end);
    // Decode: the newest boundary of each generating sequence (multi-turn chat hits it).
    const bool decode_point = end >= seq.num_prompt_tokens && end % cache_->block_tokens() == 0;
    cache_->publish(seq.tokens, live.state, live.cursor, prefill_point || decode_point,
                    decode_point && !prefill_point);
  }

  // At least one token is computed (its logits sample), and with bounded replay nothing at or
  // after the replay point is restored (see prefix_cache.h).
  int64_t restore_limit(const Sequence& seq) const {
    int64_t limit = static_cast<int64_t>(seq.tokens.size()) - 1;
    if (replay_tail_ > 0) limit = std::min(limit, replay_from(seq));
    return limit;
  }

  int64_t replay_from(const Sequence& seq) const {
    return std::max<int64_t>(0, seq.num_prompt_tokens - replay_tail_);
  }

 private:
  struct Live {
    model::SequenceState state;
    PrefixCursor cursor;
  };
  model::StatePool& pool_;
  PrefixCache* cache_;
  int64_t replay_tail_;
  std::map<RequestId, Live> states_;  // node-based: stable addresses
};

Expected<std::unique_ptr<Engine>> Engine::create(model::Model& model, const EngineOptions& opts) {
  if (opts.max_num_batched_tokens <= 0) {
    return invalid_argument("--max-num-batched-tokens must be > 0");
  }
  if (opts.prefix_cache_snapshots < -1) {
    return invalid_argument("--prefix-cache-snapshots must be >= 0 (0: prefix caching off)");
  }
  int snapshots = opts.prefix_cache_snapshots;
  if (snapshots < 0) {
    // Default: two per sequence slot, within a quarter of the budget (a V4.1-Flash snapshot is
    // about 11 MB), so a budget that fits the sequences never fails because of the cache.
    const auto& c = model.config();
    const int64_t one = int64_t{4} * c.num_total_layers() * c.window_size * c.head_dim;
    snapshots = static_cast<int>(
        std::min<int64_t>(2 * int64_t{opts.max_num_seqs}, opts.kv_cache_bytes / 4 / one));
  }
  DI_ASSIGN_OR_RETURN(MemoryPlan plan,
                      plan_state_pool(model.config(), opts.kv_cache_bytes, opts.max_num_seqs,
                                      opts.entries_per_page, snapshots));
  DI_ASSIGN_OR_RETURN(model::StatePool pool,
                      model::StatePool::create(model.config(), plan.pool, model.ops()));
  if (pool.bytes() + plan.snapshot_bytes > opts.kv_cache_bytes) {
    return internal_error("state pool plan exceeds its budget: " +
                          std::to_string(pool.bytes() + plan.snapshot_bytes));
  }
  return std::unique_ptr<Engine>(new Engine(model, opts, plan, std::move(pool)));
}

Engine::Engine(model::Model& model, EngineOptions opts, MemoryPlan plan, model::StatePool pool)
    : model_(model),
      opts_(opts),
      replay_tail_(opts.replay_tail >= 0
                       ? opts.replay_tail
                       : model.config().window_size + model.config().dspark_block_size),
      plan_(plan),
      pool_(std::make_unique<model::StatePool>(std::move(pool))),
      prefix_cache_(plan_.num_snapshots > 0
                        ? std::make_unique<PrefixCache>(*pool_, plan_.num_snapshots)
                        : nullptr),
      budget_(std::make_unique<PoolBudget>(*pool_, prefix_cache_.get(), replay_tail_)),
      scheduler_(std::make_unique<Scheduler>(
          SchedulerOptions{opts.max_num_seqs, opts.max_num_batched_tokens}, *budget_)) {}

Engine::~Engine() {
  // A deferred step's tokens land in its selection: wait for them before it goes.
  if (inflight_ && inflight_->deferred) (void)model_.wait_tokens(inflight_->selection);
}

model::SequenceState& Engine::state_of(RequestId id) {
  return budget_->state(id);
}

Status Engine::add_request(Request r) {
  const auto& c = model_.config();
  if (requests_.contains(r.id)) return invalid_argument("request id in use");
  if (r.prompt.empty()) return invalid_argument("prompt: no tokens");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= c.vocab_size) {
      return invalid_argument("prompt: token id " + std::to_string(t) + " outside [0, " +
                              std::to_string(c.vocab_size) + ")");
    }
  }
  if (r.max_tokens < 1) return invalid_argument("max_tokens must be >= 1");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
  const int64_t limit = std::min<int64_t>(c.max_seq_len, plan_.pool.max_tokens);
  if (total > limit) {
    return invalid_argument("prompt (" + std::to_string(r.prompt.size()) +
                            " tokens) + max_tokens (" + std::to_string(r.max_tokens) +
                            ") exceeds " + std::to_string(limit) +
                            " tokens (max_seq_len or the state pool's capacity)");
  }
  DI_RETURN_IF_ERROR(validate_sampling(r.sampling, c.vocab_size));
  Sequence seq;
  seq.id = r.id;
  seq.priority = r.priority;
  seq.tokens = r.prompt;
  seq.tokens.reserve(static_cast<size_t>(total));
  seq.num_prompt_tokens = static_cast<int64_t>(r.prompt.size());
  scheduler_->add(std::move(seq));
  requests_.emplace(r.id, std::move(r));
  return Status();
}

bool Engine::abort_request(RequestId id) {
  if (inflight_) {
    for (const ScheduledChunk& c : inflight_->plan.chunks) {
      if (c.seq->id != id) continue;
      late_finishes_.push_back(id);  // freed once the forward using its state returns
      return true;
    }
  }
  requests_.erase(id);
  return scheduler_->remove(id);
}

void Engine::apply_inbox(std::vector<RequestUpdate>& updates) {
  for (Message& m : inbox_.drain()) {
    if (auto* id = std::get_if<RequestId>(&m)) {
      if (abort_request(*id)) updates.push_back({*id, {}, FinishReason::kCancelled, "", 0});
      continue;
    }
    Request& r = std::get<Request>(m);
    const RequestId id = r.id;
    Status s = add_request(std::move(r));
    if (!s.ok()) updates.push_back({id, {}, FinishReason::kError, s.message(), 0});
  }
}

void Engine::fail_requests(const std::vector<RequestId>& ids,
                           const std::string& why,
                           std::vector<RequestUpdate>& updates) {
  for (RequestId id : ids) {
    scheduler_->remove(id);
    requests_.erase(id);
    updates.push_back({id, {}, FinishReason::kError, why, 0});
  }
}

void Engine::publish_prefixes(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) budget_->publish(*c.seq);
  if (prefix_cache_) {
    stats_.prefix_cache_query_tokens = prefix_cache_->stats().query_tokens;
    stats_.prefix_cache_hit_tokens = prefix_cache_->stats().hit_tokens;
  }
}

std::vector<RequestUpdate> Engine::step() {
  std::vector<RequestUpdate> updates;
  if (inflight_ && !inflight_->deferred) wait_inflight(updates);
  auto t0 = std::chrono::steady_clock::now();
  apply_inbox(updates);
  // A deferred step: the next one is scheduled on its placeholders, or it completes first.
  std::unique_ptr<InFlight> prev = std::move(inflight_);
  if (prev && !speculate(*prev)) {
    finish_deferred(*prev, nullptr, updates);
    prev.reset();
    for (RequestId id : late_finishes_) abort_request(id);
    late_finishes_.clear();
  }
  StepPlan plan = scheduler_->schedule();
  stats_.num_preemptions += static_cast<int64_t>(plan.preempted.size());
  fail_requests(plan.failed, "the request does not fit the state pool", updates);
  stats_.schedule_s += seconds_since(t0);
  if (plan.chunks.empty()) {
    if (prev) finish_deferred(*prev, nullptr, updates);
    return updates;
  }
  prepare_forward(plan, prev.get());
  if (prev || (opts_.pending_tokens && can_defer())) {
    // On this thread: a step reading prev's tokens must be issued before prev completes (its
    // state then takes the tokens), and a deferred one does not wait.
    inflight_ = issue_deferred(std::move(plan));
    if (prev) {
      stats_.num_pending_steps++;
      finish_deferred(*prev, inflight_.get(), updates);
    }
    if (!inflight_->deferred) {
      // Its logits came back with it: complete it now (after prev, whose tokens precede).
      std::unique_ptr<InFlight> done = std::move(inflight_);
      complete_step(done->plan, done->issued, updates);
      for (RequestId id : late_finishes_) abort_request(id);
      late_finishes_.clear();
    }
    return updates;
  }
  if (!opts_.async_scheduling) {
    t0 = std::chrono::steady_clock::now();
    Status s = model_.forward(ctx_, logits_rows_, logits_, &selection_);
    stats_.forward_s += seconds_since(t0);
    complete_step(plan, s, updates);
    return updates;
  }
  // The worker only touches the model, the state pool and ctx_ (which views the planned
  // sequences' token vectors); until wait_inflight() the owner thread leaves those alone:
  // abort_request() defers, add_request() only queues new sequences.
  inflight_ = std::make_unique<InFlight>();
  inflight_->plan = std::move(plan);
  inflight_->launched = std::chrono::steady_clock::now();
  inflight_->done = std::async(std::launch::async, [this]() noexcept {
    auto t = std::chrono::steady_clock::now();
    Status s = model_.forward(ctx_, logits_rows_, logits_, &selection_);
    forward_seconds_ = seconds_since(t);
    return s;
  });
  return updates;
}

void Engine::wait_inflight(std::vector<RequestUpdate>& updates) {
  const auto t0 = std::chrono::steady_clock::now();
  const double since_launch = std::chrono::duration<double>(t0 - inflight_->launched).count();
  Status s = inflight_->done.get();
  stats_.wait_s += seconds_since(t0);
  stats_.forward_s += forward_seconds_;
  stats_.caller_s += since_launch;
  stats_.overlapped_s += std::min(since_launch, forward_seconds_);
  std::unique_ptr<InFlight> done = std::move(inflight_);
  complete_step(done->plan, s, updates);
  for (RequestId id : late_finishes_) abort_request(id);
  late_finishes_.clear();
}

void Engine::prepare_forward(const StepPlan& plan, InFlight* prev) {
  auto t0 = std::chrono::steady_clock::now();
  ctx_ = model::ForwardContext();
  ctx_.pool = pool_.get();
  logits_rows_.clear();
  selection_.full.clear();
  selection_.params.clear();
  selection_.penalty_tokens.clear();
  selection_.penalty_counts.clear();
  selection_.bias_tokens.clear();
  selection_.bias_values.clear();
  selection_.masks.clear();
  pending_masks_.clear();
  int64_t row = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    const auto first = c.seq->tokens.begin() + c.begin;
    ctx_.chunks.push_back({&budget_->state(c.seq->id),
                           {first, first + c.num_tokens},
                           replay_tail_ > 0 ? budget_->replay_from(*c.seq) : 0});
    if (*first == kPlaceholderToken) {
      // prev's token for this sequence, still on the backend (a placeholder is always the last
      // token of a running sequence, so its chunk is a decode step).
      DI_CHECK(prev && prev->speculated && c.num_tokens == 1);
      const auto it = prev->sample_row.find(c.seq->id);
      DI_CHECK(it != prev->sample_row.end());
      const int64_t row = it->second;
      ctx_.chunks.back().tokens = {0};
      ctx_.chunks.back().pending =
          reinterpret_cast<const int32_t*>(prev->selection.device_tokens.data()) + row;
    }
    row += c.num_tokens;
    if (c.samples) {
      logits_rows_.push_back(row - 1);
      // Greedy rows without processors or a grammar take the backend's argmax, others sample on
      // the backend when they can (no logits copy); logprobs rows sample on the host.
      const Request& req = requests_.at(c.seq->id);
      selection_.params.emplace_back();
      uint8_t kind = model::kLogitsFull;
      if (greedy_argmax_only(req.sampling) && !req.constraint) {
        kind = model::kLogitsArgmax;
      } else if (opts_.backend_sampling && backend_samplable(req.sampling)) {
        const std::span<const int32_t> all(c.seq->tokens);
        const size_t np = static_cast<size_t>(c.seq->num_prompt_tokens);
        int64_t mask_at = -1;
        if (add_backend_sample_row(req.sampling, all.first(np), all.subspan(np), req.stream,
                                   c.seq->tokens.size(), req.constraint.get(),
                                   model_.config().vocab_size, sample_counts_,
                                   selection_.params.back(), selection_, mask_at)) {
          kind = model::kLogitsSample;
          if (mask_at >= 0) pending_masks_.emplace_back(req.constraint.get(), mask_at);
        }
      }
      selection_.full.push_back(kind);
    }
    if (!c.samples || c.num_tokens > 1) stats_.num_prefill_tokens += c.num_tokens;
  }
  selection_.fill_masks = nullptr;
  if (!pending_masks_.empty()) {
    const auto words = static_cast<size_t>(kernels::sample::mask_words(model_.config().vocab_size));
    selection_.fill_masks = [this, words](std::span<uint32_t> masks) {
      for (const auto& [constraint, at] : pending_masks_) {
        (void)constraint->allowed_bitmask(masks.subspan(static_cast<size_t>(at), words));
      }
    };
  }
  stats_.schedule_s += seconds_since(t0);
}

void Engine::complete_step(const StepPlan& plan,
                           const Status& s,
                           std::vector<RequestUpdate>& updates) {
  if (!s.ok()) {
    // The plan only holds validated tokens and reserved pages, so this is a model failure; the
    // requests in it cannot continue, the others can.
    std::vector<RequestId> ids;
    for (const ScheduledChunk& c : plan.chunks) ids.push_back(c.seq->id);
    fail_requests(ids, "forward failed: " + s.to_string(), updates);
    return;
  }
  stats_.num_steps++;
  auto t0 = std::chrono::steady_clock::now();
  scheduler_->on_step_done(plan);
  publish_prefixes(plan);
  const int64_t V = model_.config().vocab_size;
  size_t k = 0, k_full = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.samples) continue;
    Sequence& seq = *c.seq;
    const size_t row = k++;
    const bool full = selection_.full[row] == model::kLogitsFull;
    std::span<float> row_logits;
    if (full) {
      row_logits = std::span<float>(logits_.data() + static_cast<int64_t>(k_full++) * V,
                                    static_cast<size_t>(V));
    }
    // Finished by the caller while this forward ran: its token is not wanted.
    if (std::find(late_finishes_.begin(), late_finishes_.end(), seq.id) != late_finishes_.end()) {
      continue;
    }
    const Request& req = requests_.at(seq.id);
    const std::span<const int32_t> all(seq.tokens);
    const size_t np = static_cast<size_t>(seq.num_prompt_tokens);
    // The position of the new token keys the RNG: the same after a preemption's recompute.
    SampleResult r;
    if (full) {
      r = sampler_.sample(row_logits, req.sampling, all.first(np), all.subspan(np), req.stream,
                          seq.tokens.size(), req.constraint.get());
    } else {
      r.token = selection_.argmax[row];  // what the sampler's draw would pick
      if (req.constraint) req.constraint->accept(r.token);
    }
    seq.tokens.push_back(r.token);
    report_token(seq, std::move(r), updates);
  }
  stats_.sample_s += seconds_since(t0);
}

void Engine::report_token(Sequence& seq, SampleResult r, std::vector<RequestUpdate>& updates) {
  const Request& req = requests_.at(seq.id);
  stats_.num_generated_tokens++;
  RequestUpdate u{seq.id,
                  {TokenEvent{r.token, std::move(r.logprobs)}},
                  FinishReason::kNone,
                  "",
                  seq.num_prompt_tokens};
  const int64_t generated = static_cast<int64_t>(seq.tokens.size()) - seq.num_prompt_tokens;
  if (std::find(req.stop_token_ids.begin(), req.stop_token_ids.end(), r.token) !=
      req.stop_token_ids.end()) {
    u.finish = FinishReason::kStop;
  } else if (generated >= req.max_tokens) {
    u.finish = FinishReason::kLength;
  }
  if (u.finish != FinishReason::kNone) abort_request(seq.id);  // frees its state now (or later)
  updates.push_back(std::move(u));
}

}  // namespace di::engine
