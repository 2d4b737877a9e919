// deepinfer: the single command-line entry point; each subcommand lives in its own cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/cmd_grammar_bench.h"
#include "cli/cmd_render.h"
#include "cli/cmd_tokenize.h"
#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Command kCommands[] = {
    {"init-model", di::cli::run_init_model_command, "write a random-weight V4.1 checkpoint"},
    {"info", di::cli::run_info_command, "print a checkpoint's config, parameters and KV bytes"},
    {"generate", di::cli::run_generate_command, "generate tokens from a prompt"},
    {"serve", di::cli::run_serve_command, "serve the OpenAI-compatible HTTP API"},
    {"chat", di::cli::run_chat_command, "interactive chat with a server (--url) or a checkpoint"},
    {"batch", di::cli::run_batch_command, "run an OpenAI Batch file (JSONL) offline, resumably"},
    {"bench", di::cli::run_bench_command, "time forward steps (step) or the engine (offline)"},
    {"tokenize", di::cli::run_tokenize_command, "text (stdin) to token ids with a tokenizer.json"},
    {"detokenize", di::cli::run_detokenize_command, "token ids (stdin) to text"},
    {"render", di::cli::run_render_command, "chat request JSON to V4.1 prompt ids and text"},
    {"grammar-bench", di::cli::run_grammar_bench_command,
     "structured-output grammar engine over a MaskBench-format folder"},
    {"check-golden", di::cli::run_check_golden_command,
     "compare with DeepSeek's reference outputs in a golden folder"},
};

void print_usage() {
  std::fprintf(stderr, "usage: deepinfer <command> [options]   (deepinfer <command> --help)\n\n");
  for (const auto& c : kCommands) std::fprintf(stderr, "  %-14s %s\n", c.name, c.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kCommands) {
    if (!std::strcmp(argv[1], c.name)) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "deepinfer %s: internal error: %s\n", c.name, e.what());
        return 3;
      }
    }
  }
  std::fprintf(stderr, "deepinfer: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
