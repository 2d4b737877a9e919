// Temporary test driver for the tokenize/detokenize subcommands until main.cc dispatches to them:
// deepinfer_tokenize {tokenize|detokenize} [flags...]
#include <cstdio>
#include <cstring>

#include "cli/cmd_tokenize.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: deepinfer_tokenize {tokenize|detokenize} [options]\n");
    return 2;
  }
  if (std::strcmp(argv[1], "tokenize") == 0)
    return di::cli::run_tokenize_command(argc - 1, argv + 1);
  if (std::strcmp(argv[1], "detokenize") == 0) {
    return di::cli::run_detokenize_command(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "deepinfer_tokenize: unknown command '%s'\n", argv[1]);
  return 2;
}
