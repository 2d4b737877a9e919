// deepinfer check-golden GOLDEN_DIR [--threads N] [--backend cpu|cuda]
#include <CLI/CLI.hpp>
#include <iostream>

#include "backend/select.h"
#include "check/golden_check.h"
#include "cli/backend_flags.h"
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
  backend::BackendOptions backend_opts;
  add_backend_flags(app, backend_opts);
  DI_PARSE_FLAGS(app, argc, argv);
  ThreadPool pool(threads);
  auto ops = backend::make_backend(pool, backend_opts);
  if (!ops) {
    std::cerr << "deepinfer check-golden: " << ops.status().to_string() << "\n";
    return 2;
  }
  check::CheckReport report(std::cout);
  Status s = check::run_golden_check(dir, **ops, report);
  if (s.ok()) s = (*ops)->status();  // a device error makes every later comparison meaningless
  if (!s.ok()) {
    std::cerr << "deepinfer check-golden: " << s.to_string() << "\n";
    std::cout << report.passed() << " passed, " << report.failed() + 1 << " failed\n";
    return 2;
  }
  std::cout << report.passed() << " passed, " << report.failed() << " failed\n";
  return report.failed() == 0 ? 0 : 1;
}

}  // namespace di::cli
