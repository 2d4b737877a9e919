// deepinfer check-golden GOLDEN_DIR [--threads N]
#include <CLI/CLI.hpp>
#include <iostream>

#include "backend/cpu/cpu_ops.h"
#include "check/golden_check.h"
#include "cli/commands.h"
#include "cli/parse_flags.h"

namespace di::cli {

int run_check_golden_command(int argc, char** argv) {
  CLI::App app{"Compare DeepInfer with DeepSeek's reference outputs in a golden folder",
               "check-golden"};
  std::string dir;
  unsigned threads = 0;
  app.add_option("GOLDEN_DIR", dir,
                 "golden folder (checkpoint/, golden.safetensors, manifest.json)")
      ->required();
  app.add_option("--threads", threads, "CPU threads (default: all cores)");
  DI_PARSE_FLAGS(app, argc, argv);
  ThreadPool pool(threads);
  backend::CpuOps ops(pool);
  check::CheckReport report(std::cout);
  Status s = check::run_golden_check(dir, ops, report);
  if (!s.ok()) {
    std::cerr << "deepinfer check-golden: " << s.to_string() << "\n";
    std::cout << report.passed() << " passed, " << report.failed() + 1 << " failed\n";
    return 2;
  }
  std::cout << report.passed() << " passed, " << report.failed() << " failed\n";
  return report.failed() == 0 ? 0 : 1;
}

}  // namespace di::cli
