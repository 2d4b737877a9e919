// deepinfer generate --model DIR --prompt-ids 1,2,3 --max-tokens N [--temperature T --top-p P
//                    --top-k K --seed S] [--json-schema FILE | --regex RE | --choice S ... |
//                    --grammar FILE | --json-object]
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "api/grammar_constraint.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/select.h"
#include "cli/backend_flags.h"
#include "cli/commands.h"
#include "cli/parse_flags.h"
#include "cli/structured_output_flags.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "recipe/chat/chat_request_json.h"
#include "recipe/chat/render_v41.h"
#include "recipe/parse/response_parser.h"
#include "recipe/tokenizer/streaming_detokenizer.h"
#include "recipe/tokenizer/tokenizer.h"

namespace di::cli {

namespace {

Expected<std::vector<int32_t>> parse_ids(const std::string& text, int vocab) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v >= vocab) throw std::out_of_range("id");
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return invalid_argument("--prompt-ids: '" + item + "' is not a token id in [0, " +
                              std::to_string(vocab) + ")");
    }
  }
  if (ids.empty()) return invalid_argument("--prompt-ids: no ids");
  return ids;
}

}  // namespace

int run_generate_command(int argc, char** argv) {
  CLI::App app{"Generate tokens with a DeepSeek-V4.1 checkpoint", "generate"};
  std::string dir, prompt;
  int max_tokens = 16;
  unsigned threads = 0;
  engine::SamplingParams sp;
  app.add_option("--model", dir, "checkpoint folder")->required();
  std::string text;
  auto* ids_opt = app.add_option("--prompt-ids", prompt, "comma-separated token ids");
  auto* text_opt =
      app.add_option("--prompt", text, "prompt text (needs the checkpoint's BPE tokenizer.json)");
  std::string chat_file;
  auto* chat_opt =
      app.add_option("--chat", chat_file,
                     "OpenAI-style chat request JSON, rendered in the V4.1 chat format")
          ->check(CLI::ExistingFile);
  ids_opt->excludes(text_opt);
  chat_opt->excludes(ids_opt);
  chat_opt->excludes(text_opt);
  app.add_option("--max-tokens", max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  app.add_option("--temperature", sp.temperature, "0 = greedy (default)");
  app.add_option("--top-p", sp.top_p, "nucleus sampling mass");
  app.add_option("--top-k", sp.top_k, "keep the k most likely tokens (0 = all)");
  app.add_option("--seed", sp.seed, "sampling seed");
  app.add_option("--threads", threads, "CPU threads (default: all cores)");
  backend::BackendOptions backend_opts;
  add_backend_flags(app, backend_opts);
  StructuredOutputFlags so_flags;
  so_flags.add_to(app);
  DI_PARSE_FLAGS(app, argc, argv);
  auto so = so_flags.spec();
  if (!so) {
    std::cerr << "deepinfer generate: " << so.status().message() << "\n";
    return 2;
  }
  if (Status s = engine::validate_sampling(sp); !s.ok()) {
    std::cerr << "deepinfer generate: " << s.message() << "\n";
    return 2;
  }
  ThreadPool pool(threads);
  auto ops_or = backend::make_backend(pool, backend_opts);
  if (!ops_or) {
    std::cerr << "deepinfer generate: " << ops_or.status().to_string() << "\n";
    return 2;
  }
  const backend::Ops& ops = **ops_or;
  auto model = model::Model::load(dir, ops);
  if (!model) {
    std::cerr << "deepinfer generate: " << model.status().to_string() << "\n";
    return 2;
  }
  const auto& c = (*model)->config();
  if (prompt.empty() && text.empty() && chat_file.empty()) {
    std::cerr << "deepinfer generate: give --prompt-ids, --prompt or --chat\n";
    return 2;
  }
  std::optional<recipe::Tokenizer> tokenizer;
  std::optional<recipe::ParserOptions> parse_options;
  Expected<std::vector<int32_t>> ids = std::vector<int32_t>{};
  if (!text.empty() || !chat_file.empty() || *so) {
    const char* flag = *so ? "structured output" : text.empty() ? "--chat" : "--prompt";
    auto tok = recipe::Tokenizer::from_file(dir + "/tokenizer.json");
    if (!tok) {
      std::cerr << "deepinfer generate: " << flag
                << " needs a byte-level BPE tokenizer.json in the "
                   "checkpoint (init-model --tokenizer FILE): "
                << tok.status().message() << "\n";
      return 2;
    }
    tokenizer.emplace(std::move(tok).value());
    if (chat_file.empty() && text.empty()) {
      // structured output with --prompt-ids: the tokenizer is only needed for the grammar
    } else if (!text.empty()) {
      ids = tokenizer->encode(text);
    } else {
      std::ifstream in(chat_file);
      std::stringstream body;
      body << in.rdbuf();
      auto request = recipe::parse_chat_request_json(body.str());
      if (!request) {
        std::cerr << "deepinfer generate: --chat " << chat_file << ": "
                  << request.status().message() << "\n";
        return 2;
      }
      auto rendered = recipe::render_chat(*request, *tokenizer);
      if (!rendered) {
        std::cerr << "deepinfer generate: --chat " << chat_file << ": "
                  << rendered.status().message() << "\n";
        return 2;
      }
      ids = rendered->ids;
      parse_options = recipe::ParserOptions{request->thinking, {}};
    }
    if (ids->empty() && (!text.empty() || !chat_file.empty())) {
      std::cerr << "deepinfer generate: " << flag << " encodes to no tokens\n";
      return 2;
    }
  }
  if (text.empty() && chat_file.empty()) ids = parse_ids(prompt, c.vocab_size);
  std::unique_ptr<api::GrammarConstraint> constraint;
  std::optional<int32_t> eos;
  if (*so) {
    auto compiler = api::StructuredOutputCompiler::create(*tokenizer, c.vocab_size);
    Status s = compiler ? (*compiler)->prepare(**so) : compiler.status();
    if (!s.ok()) {
      std::cerr << "deepinfer generate: " << s.message() << "\n";
      return 2;
    }
    // In thinking mode the answer (and the grammar) starts after </think>.
    std::optional<int32_t> think_end;
    if (parse_options && parse_options->thinking) think_end = (*compiler)->think_end_id();
    constraint = std::make_unique<api::GrammarConstraint>((*so)->compiled, think_end);
    const int32_t e = (*compiler)->trie().eos_id();
    if (e >= 0) eos = e;
  }
  if (!ids) {
    std::cerr << "deepinfer generate: " << ids.status().message() << "\n";
    return 2;
  }
  auto state = model::StatePool::create(
      c, {1, static_cast<int64_t>(ids->size()) + max_tokens + 8, 64}, (*model)->ops());
  if (!state) {
    std::cerr << "deepinfer generate: " << state.status().to_string() << "\n";
    return 2;
  }
  auto seq = state->create_sequence().value();
  std::vector<int32_t> next = *ids, out;
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  double prefill_s = 0;
  for (int i = 0; i < max_tokens; ++i) {
    model::ForwardContext ctx;
    ctx.pool = &*state;
    ctx.chunks.push_back({&seq, next});
    Status s = (*model)->forward(ctx, {static_cast<int64_t>(next.size()) - 1}, logits);
    if (s.ok()) s = ops.status();
    if (!s.ok()) {
      std::cerr << "deepinfer generate: " << s.to_string() << "\n";
      return 2;
    }
    if (i == 0)
      prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (constraint) constraint->apply(logits);
    int32_t tok = engine::sample_token(logits, sp, 0, static_cast<uint64_t>(seq.num_tokens));
    if (constraint) constraint->accept(tok);
    out.push_back(tok);
    std::cout << (i ? "," : "") << tok << std::flush;
    if (constraint && tok == eos) break;  // the constrained text is complete
    next = {tok};
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "\n";
  if (tokenizer) {
    recipe::StreamingDetokenizer detok(*tokenizer);
    std::string out_text;
    for (int32_t t : out) out_text += detok.push(t);
    out_text += detok.flush();
    std::cout << out_text << "\n";
    if (parse_options) {
      // The chat response as an API would return it: reasoning, content and tool calls.
      recipe::ResponseParser parser(*parse_options);
      recipe::ParsedResponse parsed;
      recipe::accumulate(parsed, parser.push(out_text));
      recipe::accumulate(parsed, parser.finish());
      std::cout << "reasoning_content: " << parsed.reasoning_content
                << "\ncontent: " << parsed.content << "\ntool_calls: " << parsed.tool_calls.size()
                << "\n";
    }
  }
  std::cerr << "prefill " << ids->size() << " tokens in " << prefill_s << " s; decode "
            << (max_tokens - 1) / std::max(1e-9, total - prefill_s) << " tokens/s\n";
  return 0;
}

}  // namespace di::cli
