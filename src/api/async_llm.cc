#include "api/async_llm.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>

#include "recipe/tokenizer/streaming_detokenizer.h"

namespace di::api {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string: those bytes
// may still become a match and are held back.
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t n = std::min(text.size(), s.size() - 1); n > hold; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

struct AsyncLLM::Live {
  struct ChoiceState {
    engine::RequestId id = 0;
    std::optional<recipe::StreamingDetokenizer> detok;
    std::string pending;  // detokenized, not yet emitted (a possible stop-string prefix)
    bool open = true;
  };
  struct Req {
    EventSink sink;
    std::vector<std::string> stop;
    std::vector<ChoiceState> choices;
    int num_open = 0;
    int64_t num_prompt_tokens = 0;
    int64_t num_tokens = 0;  // prompt * n + generated, for the KV gauge
    StreamEvent event;       // being filled during one step
    Status error;
  };
  std::map<Handle, Req> requests;
  std::map<engine::RequestId, std::pair<Handle, int>> by_id;
  engine::RequestId next_id = 0;
  std::atomic<int64_t> queued{0};
};

AsyncLLM::AsyncLLM(std::unique_ptr<LLM> llm) : llm_(std::move(llm)), live_(new Live) {}

Expected<std::unique_ptr<AsyncLLM>> AsyncLLM::create(const std::string& model_dir,
                                                     const LLMOptions& options) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<LLM> llm, LLM::create(model_dir, options));
  std::unique_ptr<AsyncLLM> a(new AsyncLLM(std::move(llm)));
  // Created here, before the loop thread exists; without a BPE tokenizer there is none and a
  // structured-output request fails on the loop thread with the reason.
  if (auto so = a->llm_->structured_outputs()) a->so_compiler_ = *so;
  a->publish_stats();
  a->thread_ = std::thread([p = a.get()] { p->loop(); });
  return a;
}

AsyncLLM::~AsyncLLM() {
  inbox_.push(Stop{});
  if (thread_.joinable()) thread_.join();
}

int64_t AsyncLLM::max_model_len() const {
  return std::min<int64_t>(llm_->config().max_seq_len,
                           llm_->engine().memory_plan().pool.max_tokens);
}

AsyncLLM::Handle AsyncLLM::submit(std::vector<int32_t> prompt_ids,
                                  GenerationParams params,
                                  EventSink sink,
                                  bool thinking_prompt) {
  const Handle h = next_handle_.fetch_add(1);
  live_->queued.fetch_add(1);
  inbox_.push(
      Submit{h, std::move(prompt_ids), std::move(params), std::move(sink), thinking_prompt});
  return h;
}

void AsyncLLM::abort(Handle handle) {
  inbox_.push(Abort{handle});
}

void AsyncLLM::abort_all() {
  std::promise<void> done;
  std::future<void> f = done.get_future();
  inbox_.push(AbortAll{&done});
  f.wait();
}

AsyncStats AsyncLLM::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void AsyncLLM::loop() {
  engine::Engine& eng = llm_->engine();
  bool stopping = false;
  while (!stopping) {
    std::vector<Command> cmds;
    if (!eng.has_unfinished()) {
      // Idle: sleep until a command arrives (the timeout only bounds a missed wake-up).
      if (auto c = inbox_.pop_for(std::chrono::milliseconds(200))) cmds.push_back(std::move(*c));
    }
    for (Command& c : inbox_.drain()) cmds.push_back(std::move(c));
    for (Command& c : cmds) {
      if (auto* s = std::get_if<Submit>(&c)) {
        live_->queued.fetch_sub(1);
        start(*s);
      } else if (auto* a = std::get_if<Abort>(&c)) {
        drop(a->handle);
      } else if (auto* all = std::get_if<AbortAll>(&c)) {
        std::vector<Handle> handles;
        for (const auto& [h, r] : live_->requests) handles.push_back(h);
        for (Handle h : handles) drop(h);
        all->done->set_value();
      } else {
        stopping = true;
      }
    }
    if (stopping) break;
    if (eng.has_unfinished()) {
      std::vector<Handle> touched;
      for (engine::RequestUpdate& u : eng.step()) on_update(u, touched);
      for (Handle h : touched) {
        auto it = live_->requests.find(h);
        if (it == live_->requests.end()) continue;
        Live::Req& r = it->second;
        StreamEvent ev = std::move(r.event);
        r.event = StreamEvent{};
        ev.num_prompt_tokens = r.num_prompt_tokens;
        ev.done = r.num_open == 0;
        if (ev.done) ev.error = r.error;
        EventSink sink = ev.done ? std::move(r.sink) : r.sink;
        if (ev.done) live_->requests.erase(it);
        sink(std::move(ev));
      }
    }
    publish_stats();
  }
  std::vector<Handle> all;
  for (const auto& [h, r] : live_->requests) all.push_back(h);
  for (Handle h : all) drop(h);
}

void AsyncLLM::start(Submit& s) {
  engine::Engine& eng = llm_->engine();
  const GenerationParams& p = s.params;
  Live::Req req;
  req.sink = std::move(s.sink);
  req.stop = p.stop;
  req.num_prompt_tokens = static_cast<int64_t>(s.prompt.size());
  const uint64_t seed =
      p.seed ? *p.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  Status status;
  if (!p.stop.empty() && !llm_->tokenizer()) {
    status = invalid_argument("stop strings need a byte-level BPE tokenizer.json");
  }
  for (const std::string& stop : p.stop) {
    if (stop.empty()) status = invalid_argument("stop: empty string");
  }
  for (int c = 0; c < p.n && status.ok(); ++c) {
    // Structured output: one matcher per choice (compiled once, then from the compile cache).
    auto constraint = llm_->make_constraint(p, s.thinking_prompt);
    if (!constraint) {
      status = constraint.status();
      break;
    }
    engine::Request r;
    r.constraint = std::move(constraint).value();
    r.id = live_->next_id++;
    r.prompt = s.prompt;
    r.sampling = p.sampling;
    r.sampling.seed = seed;
    r.stream = static_cast<uint64_t>(c);
    r.max_tokens = p.max_tokens;
    r.stop_token_ids = p.stop_token_ids;
    if (llm_->eos_id() && !p.ignore_eos) r.stop_token_ids.push_back(*llm_->eos_id());
    r.priority = p.priority;
    const engine::RequestId id = r.id;
    status = eng.add_request(std::move(r));
    if (!status.ok()) break;
    Live::ChoiceState cs;
    cs.id = id;
    if (llm_->tokenizer()) cs.detok.emplace(*llm_->tokenizer(), /*skip_special=*/true);
    req.choices.push_back(std::move(cs));
    live_->by_id[id] = {s.handle, c};
  }
  if (!status.ok()) {
    for (const Live::ChoiceState& cs : req.choices) {
      eng.abort_request(cs.id);
      live_->by_id.erase(cs.id);
    }
    StreamEvent ev;
    ev.done = true;
    ev.error = status;
    ev.num_prompt_tokens = req.num_prompt_tokens;
    req.sink(std::move(ev));
    return;
  }
  req.num_open = p.n;
  req.num_tokens = req.num_prompt_tokens * p.n;
  live_->requests.emplace(s.handle, std::move(req));
}

void AsyncLLM::drop(Handle handle) {
  auto it = live_->requests.find(handle);
  if (it == live_->requests.end()) return;  // already finished
  for (const Live::ChoiceState& cs : it->second.choices) {
    if (cs.open) llm_->engine().abort_request(cs.id);
    live_->by_id.erase(cs.id);
  }
  live_->requests.erase(it);
}

void AsyncLLM::on_update(engine::RequestUpdate& u, std::vector<Handle>& touched) {
  auto where = live_->by_id.find(u.id);
  if (where == live_->by_id.end()) return;
  const auto [handle, index] = where->second;
  Live::Req& r = live_->requests.at(handle);
  Live::ChoiceState& cs = r.choices[static_cast<size_t>(index)];
  if (std::find(touched.begin(), touched.end(), handle) == touched.end()) touched.push_back(handle);
  auto& list = r.event.choices;
  if (list.empty() || list.back().index != index)
    list.push_back(ChoiceDelta{index, {}, {}, {}, {}});
  ChoiceDelta& d = list.back();
  engine::FinishReason finish = u.finish;
  for (engine::TokenEvent& t : u.new_tokens) {
    d.token_ids.push_back(t.token);
    ++r.num_tokens;
    if (t.logprobs.present) d.logprobs.push_back(std::move(t.logprobs));
    if (!cs.detok) continue;
    cs.pending += cs.detok->push(t.token);
    size_t best = std::string::npos;
    for (const std::string& s : r.stop) best = std::min(best, cs.pending.find(s));
    if (best != std::string::npos) {
      // A stop string ends the choice before it (OpenAI's convention).
      d.text += cs.pending.substr(0, best);
      cs.pending.clear();
      if (finish == engine::FinishReason::kNone) llm_->engine().finish_request(u.id);
      finish = engine::FinishReason::kStop;
      break;
    }
  }
  if (cs.detok && finish != engine::FinishReason::kNone && finish != engine::FinishReason::kStop) {
    cs.pending += cs.detok->flush();
  }
  const size_t hold = finish == engine::FinishReason::kNone ? stop_holdback(cs.pending, r.stop) : 0;
  d.text += cs.pending.substr(0, cs.pending.size() - hold);
  cs.pending.erase(0, cs.pending.size() - hold);
  if (finish == engine::FinishReason::kNone) return;
  d.finish = finish;
  cs.open = false;
  live_->by_id.erase(where);
  --r.num_open;
  if (finish == engine::FinishReason::kError && r.error.ok()) {
    r.error = Status(StatusCode::kUnavailable, u.error);
  }
}

void AsyncLLM::publish_stats() {
  AsyncStats s;
  s.engine = llm_->engine().stats();
  s.num_requests = static_cast<int64_t>(live_->requests.size());
  s.num_sequences = static_cast<int64_t>(live_->by_id.size());
  s.num_queued = live_->queued.load();
  for (const auto& [h, r] : live_->requests) s.kv_tokens_in_use += r.num_tokens;
  s.kv_token_capacity = llm_->engine().memory_plan().pool.max_tokens;
  s.sequence_capacity = llm_->engine().memory_plan().pool.max_sequences;
  s.engine_running = static_cast<int64_t>(llm_->engine().num_running());
  s.engine_waiting = static_cast<int64_t>(llm_->engine().num_waiting());
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = std::move(s);
}

}  // namespace di::api
