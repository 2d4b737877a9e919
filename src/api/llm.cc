#include "api/llm.h"

#include <algorithm>
#include <map>
#include <random>

#include "recipe/chat/render_v41.h"
#include "recipe/tokenizer/streaming_detokenizer.h"

namespace di::api {

int64_t GenerationOutput::num_generated_tokens() const {
  int64_t n = 0;
  for (const Choice& c : choices) n += static_cast<int64_t>(c.token_ids.size());
  return n;
}

// Requests in flight during one generate() call.
struct LLM::Active {
  struct Pending {
    GenerationOutput out;
    std::vector<std::string> stop;
    int num_open = 0;
  };
  struct ChoiceRef {
    size_t index = 0;  // key of `pending`
    int choice = 0;
    std::optional<recipe::StreamingDetokenizer> detok;
    size_t stop_scan_from = 0;  // text before this cannot start a stop string match
  };
  std::map<size_t, Pending> pending;
  std::map<engine::RequestId, ChoiceRef> choices;
};

LLM::~LLM() = default;

Expected<std::unique_ptr<LLM>> LLM::create(const std::string& model_dir,
                                           const LLMOptions& options) {
  std::unique_ptr<LLM> llm(new LLM());
  llm->threads_ = std::make_unique<ThreadPool>(options.num_threads);
  DI_ASSIGN_OR_RETURN(llm->ops_, backend::make_backend(*llm->threads_, options.backend));
  DI_ASSIGN_OR_RETURN(llm->model_, model::Model::load(model_dir, *llm->ops_));
  DI_ASSIGN_OR_RETURN(llm->engine_, engine::Engine::create(*llm->model_, options.engine));
  auto tok = recipe::Tokenizer::from_file(
      options.tokenizer_path.empty() ? model_dir + "/tokenizer.json" : options.tokenizer_path);
  if (tok) {
    llm->tokenizer_.emplace(std::move(tok).value());
    llm->eos_id_ = llm->tokenizer_->token_to_id("<｜end▁of▁sentence｜>");
  } else {
    llm->tokenizer_error_ = tok.status().message();
  }
  return llm;
}

Expected<StructuredOutputCompiler*> LLM::structured_outputs() {
  if (so_compiler_) return so_compiler_.get();
  if (!tokenizer_) {
    return invalid_argument("structured outputs need a byte-level BPE tokenizer.json in the " +
                            std::string("checkpoint (") + tokenizer_error_ + ")");
  }
  DI_ASSIGN_OR_RETURN(so_compiler_,
                      StructuredOutputCompiler::create(
                          *tokenizer_, static_cast<size_t>(model_->config().vocab_size)));
  return so_compiler_.get();
}

Expected<std::shared_ptr<engine::TokenConstraint>> LLM::make_constraint(
    const GenerationParams& params, bool thinking_prompt) {
  if (!params.structured_output) return std::shared_ptr<engine::TokenConstraint>();
  StructuredOutput so = *params.structured_output;
  DI_ASSIGN_OR_RETURN(StructuredOutputCompiler * compiler, structured_outputs());
  if (!so.compiled) DI_RETURN_IF_ERROR(compiler->prepare(so));
  // A thinking-mode chat prompt ends inside <think>: the answer starts after </think>.
  std::optional<int32_t> think_end;
  if (thinking_prompt) {
    think_end = compiler->think_end_id();
    if (!think_end) return invalid_argument("thinking mode: the tokenizer has no </think>");
  }
  return std::shared_ptr<engine::TokenConstraint>(
      std::make_shared<GrammarConstraint>(so.compiled, think_end));
}

Expected<std::vector<int32_t>> LLM::prompt_ids(const Prompt& prompt) const {
  if (prompt.chat) {
    if (!tokenizer_) {
      return invalid_argument(
          "chat requests need a byte-level BPE tokenizer.json in the checkpoint (" +
          tokenizer_error_ + ")");
    }
    DI_ASSIGN_OR_RETURN(recipe::RenderedPrompt rendered,
                        recipe::render_chat(*prompt.chat, *tokenizer_));
    return std::move(rendered.ids);
  }
  if (prompt.text) {
    if (!tokenizer_) {
      return invalid_argument(
          "text prompts need a byte-level BPE tokenizer.json in the checkpoint (" +
          tokenizer_error_ + "); send token ids instead");
    }
    return tokenizer_->encode(*prompt.text);
  }
  return prompt.token_ids;
}

Status LLM::start(size_t index, const Prompt& prompt, const GenerationParams& params) {
  Active::Pending p;
  p.out.index = index;
  DI_ASSIGN_OR_RETURN(p.out.prompt_token_ids, prompt_ids(prompt));
  if (!params.stop.empty() && !tokenizer_) {
    return invalid_argument("stop strings need a byte-level BPE tokenizer.json in the checkpoint");
  }
  for (const std::string& s : params.stop) {
    if (s.empty()) return invalid_argument("stop: empty string");
  }
  if (params.n < 1 || params.n > 64) return invalid_argument("n must be in [1, 64]");
  // Unseeded requests draw a fresh seed, so two runs differ as users expect; it is reported.
  p.out.seed = params.seed ? *params.seed
                           : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  p.stop = params.stop;
  const bool thinking_prompt =
      prompt.chat && prompt.chat->thinking && prompt.chat->add_generation_prompt;
  DI_ASSIGN_OR_RETURN(std::shared_ptr<engine::TokenConstraint> constraint,
                      make_constraint(params, thinking_prompt));
  std::vector<engine::RequestId> started;
  for (int c = 0; c < params.n; ++c) {
    engine::Request r;
    r.id = next_id_++;
    r.prompt = p.out.prompt_token_ids;
    r.sampling = params.sampling;
    r.sampling.seed = p.out.seed;
    r.stream = static_cast<uint64_t>(c);
    r.max_tokens = params.max_tokens;
    r.stop_token_ids = params.stop_token_ids;
    if (eos_id_ && !params.ignore_eos) r.stop_token_ids.push_back(*eos_id_);
    r.priority = params.priority;
    if (c == 0) {
      r.constraint = std::move(constraint);
    } else if (params.structured_output) {
      // One matcher per choice; the compiled grammar comes from the compile cache.
      auto more = make_constraint(params, thinking_prompt);
      if (more) r.constraint = std::move(more).value();
    }
    if (Status s = engine_->add_request(std::move(r)); !s.ok()) {
      for (engine::RequestId id : started) {
        engine_->abort_request(id);
        active_->choices.erase(id);
      }
      return s;
    }
    started.push_back(next_id_ - 1);
    Active::ChoiceRef ref;
    ref.index = index;
    ref.choice = c;
    if (tokenizer_) ref.detok.emplace(*tokenizer_, /*skip_special=*/true);
    active_->choices.emplace(next_id_ - 1, std::move(ref));
    p.out.choices.push_back(Choice{c, {}, "", engine::FinishReason::kNone, {}});
  }
  p.num_open = params.n;
  active_->pending.emplace(index, std::move(p));
  return Status();
}

void LLM::on_update(engine::RequestUpdate& u,
                    const std::function<void(GenerationOutput&&)>& on_done) {
  auto it = active_->choices.find(u.id);
  if (it == active_->choices.end()) return;
  Active::ChoiceRef& ref = it->second;
  Active::Pending& p = active_->pending.at(ref.index);
  Choice& ch = p.out.choices[static_cast<size_t>(ref.choice)];
  engine::FinishReason finish = u.finish;
  for (engine::TokenEvent& t : u.new_tokens) {
    ch.token_ids.push_back(t.token);
    if (t.logprobs.present) ch.logprobs.push_back(std::move(t.logprobs));
    if (!ref.detok) continue;
    ch.text += ref.detok->push(t.token);
    if (finish != engine::FinishReason::kNone) ch.text += ref.detok->flush();
    // A stop string ends the choice before it (OpenAI's convention); only text that could start
    // a match is scanned again.
    size_t best = std::string::npos, longest = 0;
    for (const std::string& s : p.stop) {
      const size_t pos = ch.text.find(s, ref.stop_scan_from);
      best = std::min(best, pos);
      longest = std::max(longest, s.size());
    }
    if (best != std::string::npos) {
      ch.text.resize(best);
      if (finish == engine::FinishReason::kNone) engine_->finish_request(u.id);
      finish = engine::FinishReason::kStop;
      break;
    }
    ref.stop_scan_from = ch.text.size() >= longest ? ch.text.size() - longest + 1 : 0;
  }
  if (finish == engine::FinishReason::kNone) return;
  ch.finish = finish;
  if (finish == engine::FinishReason::kError && p.out.status.ok()) {
    p.out.status = Status(StatusCode::kUnavailable, u.error);
  }
  active_->choices.erase(it);
  if (--p.num_open > 0) return;
  GenerationOutput out = std::move(p.out);
  active_->pending.erase(out.index);
  on_done(std::move(out));
}

void LLM::generate(const std::vector<Prompt>& prompts,
                   const std::vector<GenerationParams>& params,
                   const std::function<void(GenerationOutput&&)>& on_done) {
  active_ = std::make_unique<Active>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerationParams& gp = params.size() == 1 ? params[0] : params.at(i);
    if (Status s = start(i, prompts[i], gp); !s.ok()) {
      GenerationOutput out;
      out.index = i;
      out.status = s;
      on_done(std::move(out));
    }
  }
  while (engine_->has_unfinished()) {
    for (engine::RequestUpdate& u : engine_->step()) on_update(u, on_done);
  }
  active_.reset();
}

std::vector<GenerationOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                            const std::vector<GenerationParams>& params) {
  std::vector<GenerationOutput> outs;
  generate(prompts, params, [&](GenerationOutput&& o) { outs.push_back(std::move(o)); });
  std::sort(outs.begin(), outs.end(),
            [](const GenerationOutput& a, const GenerationOutput& b) { return a.index < b.index; });
  return outs;
}

}  // namespace di::api
