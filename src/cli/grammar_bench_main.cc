// SPDX-License-Identifier: Apache-2.0
// TEMPORARY executable for `grammar-bench` until src/cli/main.cc dispatches to it (issue #7).
#include "cli/cmd_grammar_bench.h"

int main(int argc, char** argv) {
  return di::cli::run_grammar_bench_command(argc, argv);
}
