#include "engine/engine.h"

#include <algorithm>
#include <chrono>

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

// StateBudget over the model's StatePool: one SequenceState per admitted request.
class Engine::PoolBudget : public StateBudget {
 public:
  explicit PoolBudget(model::StatePool& pool) : pool_(pool) {}

  bool try_admit(RequestId id) override {
    auto seq = pool_.create_sequence();
    if (!seq) return false;
    states_.emplace(id, std::move(seq).value());
    return true;
  }
  bool try_reserve(RequestId id, int64_t num_tokens) override {
    // Reserving here (forward's own reserve then finds the pages present) is what lets the
    // scheduler react to a full pool before the forward instead of failing inside it.
    return pool_.reserve(states_.at(id), num_tokens).ok();
  }
  void release(RequestId id) override {
    auto it = states_.find(id);
    if (it == states_.end()) return;
    pool_.release_sequence(it->second);
    states_.erase(it);
  }
  model::SequenceState& state(RequestId id) { return states_.at(id); }

 private:
  model::StatePool& pool_;
  std::map<RequestId, model::SequenceState> states_;  // node-based: stable addresses
};

Expected<std::unique_ptr<Engine>> Engine::create(model::Model& model, const EngineOptions& opts) {
  if (opts.max_num_batched_tokens <= 0) {
    return invalid_argument("--max-num-batched-tokens must be > 0");
  }
  DI_ASSIGN_OR_RETURN(MemoryPlan plan, plan_state_pool(model.config(), opts.kv_cache_bytes,
                                                       opts.max_num_seqs, opts.entries_per_page));
  DI_ASSIGN_OR_RETURN(model::StatePool pool, model::StatePool::create(model.config(), plan.pool));
  if (pool.bytes() > opts.kv_cache_bytes) {
    return internal_error("state pool plan exceeds its budget: " + std::to_string(pool.bytes()));
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
      budget_(std::make_unique<PoolBudget>(*pool_)),
      scheduler_(std::make_unique<Scheduler>(
          SchedulerOptions{opts.max_num_seqs, opts.max_num_batched_tokens}, *budget_)) {}

Engine::~Engine() = default;

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

std::vector<RequestUpdate> Engine::step() {
  std::vector<RequestUpdate> updates;
  auto t0 = std::chrono::steady_clock::now();
  apply_inbox(updates);
  StepPlan plan = scheduler_->schedule();
  stats_.num_preemptions += static_cast<int64_t>(plan.preempted.size());
  fail_requests(plan.failed, "the request does not fit the state pool", updates);
  stats_.schedule_s += seconds_since(t0);
  if (!plan.chunks.empty()) run_plan(plan, updates);
  return updates;
}

void Engine::run_plan(const StepPlan& plan, std::vector<RequestUpdate>& updates) {
  auto t0 = std::chrono::steady_clock::now();
  model::ForwardContext ctx;
  ctx.pool = pool_.get();
  logits_rows_.clear();
  int64_t row = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    const auto first = c.seq->tokens.begin() + c.begin;
    const int64_t replay_from = std::max<int64_t>(0, c.seq->num_prompt_tokens - replay_tail_);
    ctx.chunks.push_back({&budget_->state(c.seq->id),
                          {first, first + c.num_tokens},
                          replay_tail_ > 0 ? replay_from : 0});
    row += c.num_tokens;
    if (c.samples) logits_rows_.push_back(row - 1);
    if (!c.samples || c.num_tokens > 1) stats_.num_prefill_tokens += c.num_tokens;
  }
  stats_.schedule_s += seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  Status s = model_.forward(ctx, logits_rows_, logits_);
  stats_.forward_s += seconds_since(t0);
  if (!s.ok()) {
    // The plan only holds validated tokens and reserved pages, so this is a model failure; the
    // requests in it cannot continue, the others can.
    std::vector<RequestId> ids;
    for (const ScheduledChunk& c : plan.chunks) ids.push_back(c.seq->id);
    fail_requests(ids, "forward failed: " + s.to_string(), updates);
    return;
  }
  stats_.num_steps++;
  t0 = std::chrono::steady_clock::now();
  scheduler_->on_step_done(plan);
  const int64_t V = model_.config().vocab_size;
  size_t k = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.samples) continue;
    Sequence& seq = *c.seq;
    const Request& req = requests_.at(seq.id);
    std::span<float> row_logits(logits_.data() + static_cast<int64_t>(k++) * V,
                                static_cast<size_t>(V));
    const std::span<const int32_t> all(seq.tokens);
    const size_t np = static_cast<size_t>(seq.num_prompt_tokens);
    // The position of the new token keys the RNG: the same after a preemption's recompute.
    SampleResult r = sampler_.sample(row_logits, req.sampling, all.first(np), all.subspan(np),
                                     req.stream, seq.tokens.size(), req.constraint.get());
    seq.tokens.push_back(r.token);
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
    if (u.finish != FinishReason::kNone) abort_request(seq.id);  // frees its state now
    updates.push_back(std::move(u));
  }
  stats_.sample_s += seconds_since(t0);
}

}  // namespace di::engine
