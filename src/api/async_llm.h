// di::api::AsyncLLM: the online API (like vLLM's AsyncLLM). Owns an LLM and runs its engine on
// one engine-loop thread; any thread submits token-id requests and receives per-step streaming
// events (new text with stop strings applied, token ids, logprobs, finish) through a callback.
// The server (src/server) and `deepinfer chat --model` sit on top of it.
//
// Threading: submit(), abort() and stats() are safe from any thread; commands reach the loop
// through engine::Queue (the one cross-thread handoff). Sinks run on the loop thread and must not
// block (the server posts the event to its io_context).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "api/llm.h"
#include "engine/queue.h"

namespace di::api {

// What one step produced for one choice.
struct ChoiceDelta {
  int index = 0;
  std::string text;  // new text; bytes that may begin a stop string are held back until decided
  std::vector<int32_t> token_ids;
  std::vector<engine::TokenLogprobs> logprobs;  // per new token, when asked for
  engine::FinishReason finish = engine::FinishReason::kNone;
};

// What one step produced for one request (only choices with news are listed).
struct StreamEvent {
  std::vector<ChoiceDelta> choices;
  int64_t num_prompt_tokens = 0;
  bool done = false;  // every choice has finished; the last event for this request
  Status error;       // with done: the request was rejected or failed
};

using EventSink = std::function<void(StreamEvent&&)>;

// A snapshot for /metrics; see server/metrics.cc's read_engine_stats().
struct AsyncStats {
  engine::EngineStats engine;
  int64_t num_requests = 0;       // accepted, not finished (whole requests)
  int64_t num_sequences = 0;      // their choices in the engine (running or waiting)
  int64_t num_queued = 0;         // submitted, not yet handed to the engine
  int64_t kv_tokens_in_use = 0;   // prompt + generated tokens of live sequences
  int64_t kv_token_capacity = 0;  // the state pool's token capacity
  int64_t sequence_capacity = 0;  // the state pool's sequence slots (max_num_seqs)
  int64_t engine_running = 0;     // sequences the engine's scheduler runs
  int64_t engine_waiting = 0;     // sequences it holds waiting (admission, preemption)
};

class AsyncLLM {
 public:
  using Handle = uint64_t;

  // Loads the checkpoint and starts the loop thread.
  static Expected<std::unique_ptr<AsyncLLM>> create(const std::string& model_dir,
                                                    const LLMOptions& options);
  ~AsyncLLM();  // cancels everything in flight and joins the loop

  // Any thread. Queues a request; `sink` receives its events on the loop thread, the last one
  // with done = true (unless it is aborted first, after which nothing more is delivered).
  // `thinking_prompt`: the prompt ends inside <think> (a thinking-mode chat), so a structured
  // output applies after </think>.
  Handle submit(std::vector<int32_t> prompt_ids,
                GenerationParams params,
                EventSink sink,
                bool thinking_prompt = false);
  // Any thread. Cancels the request and frees its state at the start of the next step.
  void abort(Handle handle);
  // Any thread but the loop's. Cancels every request and returns once the loop has dropped them,
  // so no sink runs after it returns (the server calls it before its io_context goes away).
  void abort_all();

  AsyncStats stats() const;
  // The tokenizer, prompt rendering and config; LLM::prompt_ids is thread-safe.
  const LLM& llm() const { return *llm_; }
  // The structured-output compiler, created with the AsyncLLM (null without a BPE tokenizer);
  // thread-safe, so callers compile a request's grammar on their own threads and the engine loop
  // only finds it compiled.
  StructuredOutputCompiler* structured_outputs() const { return so_compiler_; }
  // The longest prompt + max_tokens a request may have.
  int64_t max_model_len() const;

 private:
  struct Submit {
    Handle handle;
    std::vector<int32_t> prompt;
    GenerationParams params;
    EventSink sink;
    bool thinking_prompt = false;
  };
  struct Abort {
    Handle handle;
  };
  struct AbortAll {
    std::promise<void>* done;
  };
  struct Stop {};
  using Command = std::variant<Submit, Abort, AbortAll, Stop>;
  struct Live;

  explicit AsyncLLM(std::unique_ptr<LLM> llm);
  void loop();
  void start(Submit& s);
  void drop(Handle handle);
  void on_update(engine::RequestUpdate& u, std::vector<Handle>& touched);
  void publish_stats();

  std::unique_ptr<LLM> llm_;
  StructuredOutputCompiler* so_compiler_ = nullptr;  // owned by llm_
  engine::Queue<Command> inbox_;
  std::atomic<Handle> next_handle_{1};
  std::unique_ptr<Live> live_;  // loop thread only
  // stats() readers copy under this lock; the loop writes once per step.
  mutable std::mutex stats_mu_;
  AsyncStats stats_;
  std::thread thread_;
};

}  // namespace di::api
