// Pending tokens (engine.h): a step whose tokens are all chosen on the backend leaves them there,
// and the next step() schedules and issues the following step on placeholders for them before it
// waits for them. Its decode rows embed and hash the tokens on the backend (model.h, pending
// tokens), so the device runs step k + 1 while step k's tokens come back.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_in_flight.h"

namespace di::engine {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether the request's next token can be chosen before the host has seen its previous one:
// nothing of the sampling reads the token history (penalties) or the host's state (a grammar),
// and no row needs its logits (logprobs).
bool next_token_needs_no_host(const Request& r) {
  const SamplingParams& p = r.sampling;
  return !r.constraint && !p.logprobs && p.repetition_penalty == 1.0f &&
         p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}
}  // namespace

bool Engine::can_defer() const {
  return !logits_rows_.empty() && std::none_of(selection_.full.begin(), selection_.full.end(),
                                               [](uint8_t k) { return k == model::kLogitsFull; });
}

std::unique_ptr<Engine::InFlight> Engine::issue_deferred(StepPlan plan) {
  auto f = std::make_unique<InFlight>();
  f->deferred = opts_.pending_tokens && can_defer();
  selection_.defer = f->deferred;
  for (const ScheduledChunk& c : plan.chunks) {
    f->chunk_ids.push_back(c.seq->id);
    if (c.samples) {
      f->sample_row.emplace(c.seq->id, static_cast<int64_t>(f->sample_ids.size()));
      f->sample_ids.push_back(c.seq->id);
    }
  }
  for (const model::SequenceChunk& ch : ctx_.chunks) {
    if (!ch.pending) continue;
    const auto at = &ch - ctx_.chunks.data();
    f->pending_ids.insert(plan.chunks[static_cast<size_t>(at)].seq->id);
  }
  const auto t0 = std::chrono::steady_clock::now();
  f->issued = model_.forward(ctx_, logits_rows_, logits_, &selection_);
  stats_.forward_s += seconds_since(t0);
  if (f->deferred) f->selection = std::move(selection_);
  selection_.defer = false;
  f->plan = std::move(plan);
  return f;
}

bool Engine::speculate(InFlight& f) {
  if (!opts_.pending_tokens || !f.issued.ok() || !late_finishes_.empty()) return false;
  for (RequestId id : f.sample_ids) {
    const Sequence* seq = scheduler_->find(id);
    auto req = requests_.find(id);
    if (!seq || req == requests_.end() || !next_token_needs_no_host(req->second)) return false;
  }
  // The plan's sequences are all present: none was removed while it ran (late_finishes_ empty).
  scheduler_->on_step_done(f.plan);
  publish_prefixes(f.plan);
  f.placeholder_at.clear();
  for (RequestId id : f.sample_ids) {
    Sequence* seq = scheduler_->find(id);
    const int64_t generated = static_cast<int64_t>(seq->tokens.size()) - seq->num_prompt_tokens;
    if (generated + 1 >= requests_.at(id).max_tokens) {
      // It ends with this step's token: no step follows, so it sits the next one out.
      seq->awaiting_token = true;
      f.placeholder_at.push_back(-1);
      continue;
    }
    f.placeholder_at.push_back(static_cast<int64_t>(seq->tokens.size()));
    seq->tokens.push_back(kPlaceholderToken);
  }
  f.speculated = true;
  return true;
}

void Engine::fail_one(RequestId id, const std::string& why, std::vector<RequestUpdate>& updates) {
  if (!requests_.contains(id) || !scheduler_->find(id)) return;
  updates.push_back({id, {}, FinishReason::kError, why, 0});
  abort_request(id);
}

void Engine::finish_deferred(InFlight& f,
                             const InFlight* next,
                             std::vector<RequestUpdate>& updates) {
  auto t0 = std::chrono::steady_clock::now();
  Status s = f.issued;
  if (s.ok()) s = model_.wait_tokens(f.selection);
  stats_.wait_s += seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  if (!s.ok()) {
    // As complete_step: the requests of the failed step cannot continue (a step issued since
    // reads its tokens: the backend's latched error fails it too). A sequence of that step is
    // freed once it returns (abort_request defers it).
    for (RequestId id : f.chunk_ids) fail_one(id, "forward failed: " + s.to_string(), updates);
    return;
  }
  stats_.num_steps++;
  if (!f.speculated) {
    scheduler_->on_step_done(f.plan);  // no sequence of it was removed while it ran
    publish_prefixes(f.plan);
  }
  // The tokens first (sequences and the model's state of the pending rows issued since), then
  // the updates, whose finishes may free sequences.
  std::vector<Sequence*> seqs(f.sample_ids.size(), nullptr);
  for (size_t r = 0; r < f.sample_ids.size(); ++r) {
    const RequestId id = f.sample_ids[r];
    Sequence* seq = scheduler_->find(id);
    // Removed since (failed, or finished by the caller before it could continue), or finished
    // by the caller while it ran: its token is not wanted.
    if (!seq || !requests_.contains(id)) continue;
    if (!f.speculated &&
        std::find(late_finishes_.begin(), late_finishes_.end(), id) != late_finishes_.end()) {
      continue;
    }
    const int32_t token = f.selection.argmax[r];
    if (f.speculated && f.placeholder_at[r] >= 0) {
      seq->tokens[static_cast<size_t>(f.placeholder_at[r])] = token;
    } else {
      seq->tokens.push_back(token);
      seq->awaiting_token = false;
    }
    if (next && next->pending_ids.contains(id)) {
      const Status c = model_.commit_token(state_of(id), token);
      if (!c.ok()) {
        fail_one(id, "forward failed: " + c.to_string(), updates);
        continue;
      }
    }
    seqs[r] = seq;
  }
  for (size_t r = 0; r < seqs.size(); ++r) {
    if (!seqs[r]) continue;
    const Request& req = requests_.at(seqs[r]->id);
    SampleResult res;
    res.token = f.selection.argmax[r];
    if (req.constraint) req.constraint->accept(res.token);
    report_token(*seqs[r], std::move(res), updates);
  }
  stats_.sample_s += seconds_since(t0);
}

}  // namespace di::engine
