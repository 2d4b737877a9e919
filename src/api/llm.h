// di::api::LLM: the offline API (like vLLM's LLM). Loads a checkpoint, owns the backend (cpu or
// cuda, LLMOptions::backend) and an engine, and turns prompts (text or token ids) with generation
// parameters into finished outputs. This is where text lives: tokenizing prompts, detokenizing
// choices, stop strings, the end-of-sentence stop token, n > 1 choices and drawing seeds for
// unseeded requests. Not thread-safe: one thread drives an LLM (it is the engine's owner thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/grammar_constraint.h"
#include "api/structured_output.h"
#include "backend/ops.h"
#include "backend/select.h"
#include "engine/engine.h"
#include "model/model.h"
#include "recipe/chat/chat_types.h"
#include "recipe/tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace di::api {

struct StructuredOutput;  // api/structured_output.h

struct LLMOptions {
  engine::EngineOptions engine;
  unsigned num_threads = 0;         // CPU threads; 0: all cores
  backend::BackendOptions backend;  // cpu (default) or cuda, and the cuda backend's options
  std::string tokenizer_path;       // empty: the checkpoint's tokenizer.json
};

// One of: a chat request (rendered in the V4.1 chat format), text, or token ids (used when
// neither chat nor text is present).
struct Prompt {
  std::optional<recipe::ChatRequest> chat;
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;
};

struct GenerationParams {
  engine::SamplingParams sampling;  // sampling.seed is ignored; see `seed`
  std::optional<uint64_t> seed;     // absent: a fresh random seed per request
  int max_tokens = 16;
  int n = 1;                      // choices; choice i samples with RNG stream i
  std::vector<std::string> stop;  // stop strings, matched on the detokenized text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;  // do not stop at the tokenizer's end-of-sentence token
  int priority = 0;         // lower first
  // Constrains each choice's text (JSON Schema, regex, choice, EBNF). Compiled on start() unless
  // already compiled (see read_structured_output). In thinking mode it applies after </think>.
  std::optional<StructuredOutput> structured_output;
};

struct Choice {
  int index = 0;
  std::vector<int32_t> token_ids;
  std::string text;  // empty when the checkpoint has no BPE tokenizer
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::vector<engine::TokenLogprobs> logprobs;  // per token, when asked for
};

struct GenerationOutput {
  size_t index = 0;  // position in the prompts given to generate()
  Status status;     // not OK: the request was rejected or failed; choices may be partial
  std::vector<int32_t> prompt_token_ids;
  std::vector<Choice> choices;
  uint64_t seed = 0;  // the seed used (drawn when the request had none)
  int64_t num_generated_tokens() const;
};

class LLM {
 public:
  static Expected<std::unique_ptr<LLM>> create(const std::string& model_dir,
                                               const LLMOptions& options);
  ~LLM();

  // Runs every prompt to completion; outputs in prompt order. `params` holds one entry for all
  // prompts or one per prompt. Problems with one prompt are in its output's status.
  std::vector<GenerationOutput> generate(const std::vector<Prompt>& prompts,
                                         const std::vector<GenerationParams>& params);
  // The same, handing each output to `on_done` as soon as its last choice finishes.
  void generate(const std::vector<Prompt>& prompts,
                const std::vector<GenerationParams>& params,
                const std::function<void(GenerationOutput&&)>& on_done);

  // The prompt's token ids (chat rendered in the V4.1 format, text encoded). Thread-safe: it only
  // reads the immutable tokenizer, so server threads may call it while the owner thread steps.
  Expected<std::vector<int32_t>> prompt_ids(const Prompt& prompt) const;
  std::optional<int32_t> eos_id() const { return eos_id_; }

  // Null when the checkpoint's tokenizer.json is not byte-level BPE (text prompts are refused).
  const recipe::Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  const std::string& tokenizer_error() const { return tokenizer_error_; }
  engine::Engine& engine() { return *engine_; }
  // Compiles structured outputs against this checkpoint's tokenizer (thread-safe; built on first
  // use). Error when the checkpoint has no BPE tokenizer.
  Expected<StructuredOutputCompiler*> structured_outputs();
  // The token constraint for one choice of a request with params.structured_output (null
  // without one), compiling it through structured_outputs() unless already compiled.
  // `thinking_prompt`: the prompt ends inside <think>; the grammar applies after </think>.
  Expected<std::shared_ptr<engine::TokenConstraint>> make_constraint(const GenerationParams& params,
                                                                     bool thinking_prompt);
  const model::ModelConfig& config() const { return model_->config(); }

 private:
  struct Active;
  LLM() = default;

  ThreadPool* threads() { return threads_.get(); }
  Status start(size_t index, const Prompt& prompt, const GenerationParams& params);
  void on_update(engine::RequestUpdate& u, const std::function<void(GenerationOutput&&)>& on_done);

  std::unique_ptr<ThreadPool> threads_;
  std::unique_ptr<backend::Ops> ops_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<engine::Engine> engine_;
  std::optional<recipe::Tokenizer> tokenizer_;
  std::string tokenizer_error_;
  std::optional<int32_t> eos_id_;
  engine::RequestId next_id_ = 0;
  std::unique_ptr<Active> active_;
  std::unique_ptr<StructuredOutputCompiler> so_compiler_;
};

}  // namespace di::api
