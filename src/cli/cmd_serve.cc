// deepinfer serve --model DIR [--host --port --api-key --served-model-name --max-model-len ...]:
// the OpenAI-compatible HTTP server (issue #5; docs/server.md). Prints "listening on HOST:PORT"
// once it accepts connections; SIGTERM drains and exits 0.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "api/async_llm.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/parse_flags.h"
#include "engine/memory_plan.h"
#include "server/server.h"

namespace di::cli {

int run_serve_command(int argc, char** argv) {
  CLI::App app{"Serve the OpenAI-compatible HTTP API", "serve"};
  server::ServerOptions sopts;
  api::LLMOptions opts;
  std::string dir;
  int64_t max_pending = 0;
  app.add_option("--model", dir, "checkpoint folder")->required();
  app.add_option("--tokenizer", opts.tokenizer_path, "tokenizer.json (default: the checkpoint's)");
  app.add_option("--host", sopts.host, "address to listen on")->capture_default_str();
  app.add_option("--port", sopts.port, "port (0: any free port)")->capture_default_str();
  app.add_option("--api-key", sopts.api_key, "require 'Authorization: Bearer KEY' on /v1 routes");
  app.add_option("--served-model-name", sopts.served_model_name, "model name in the API")
      ->capture_default_str();
  app.add_option("--max-model-len", sopts.max_model_len,
                 "longest prompt + completion (default: the engine's limit)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-pending", max_pending,
                 "generation requests held at once before new ones get 429 "
                 "(default: 16 x --max-num-seqs)")
      ->check(CLI::PositiveNumber);
  app.add_option("--drain-timeout", sopts.drain_timeout_s,
                 "seconds in-flight requests get after SIGTERM")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_engine_flags(app, opts);
  DI_PARSE_FLAGS(app, argc, argv);
  sopts.model_dir = std::filesystem::absolute(dir).string();
  sopts.max_pending = max_pending > 0 ? max_pending : int64_t{16} * opts.engine.max_num_seqs;
  auto llm = api::AsyncLLM::create(dir, opts);
  if (!llm) {
    std::cerr << "deepinfer serve: " << llm.status().to_string() << "\n";
    return 2;
  }
  const auto& eng = (*llm)->llm();
  if (!eng.tokenizer()) {
    std::cerr << "deepinfer serve: warning: no BPE tokenizer (" << eng.tokenizer_error()
              << "); only token-id prompts work\n";
  }
  Status s = server::run_server(**llm, sopts, [&](uint16_t port) {
    std::printf("deepinfer serve: model '%s' (max_model_len %lld), listening on %s:%u\n",
                sopts.served_model_name.c_str(), static_cast<long long>((*llm)->max_model_len()),
                sopts.host.c_str(), port);
    std::fflush(stdout);
  });
  if (!s.ok()) {
    std::cerr << "deepinfer serve: " << s.to_string() << "\n";
    return 2;
  }
  std::fprintf(stderr, "deepinfer serve: drained, exiting\n");
  return 0;
}

}  // namespace di::cli
