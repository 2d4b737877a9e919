// `deepinfer check-golden`: every comparison a golden folder's README describes under
// "Comparing", with the tolerances from its manifest.json (shared/golden/README.md): integer data
// exactly, each layer on its recorded inputs, whole-model and teacher-forced decode logits, greedy
// tokens up to the first fragile step, and DSpark rows. One line per check, then
// "N passed, M failed".
#pragma once

#include <ostream>
#include <string>

#include "backend/ops.h"
#include "util/status.h"

namespace di::check {

class CheckReport {
 public:
  explicit CheckReport(std::ostream& out) : out_(out) {}
  // Prints "PASS|FAIL  name  detail" and counts it.
  void check(const std::string& name, bool ok, const std::string& detail);
  void info(const std::string& line);
  int passed() const { return passed_; }
  int failed() const { return failed_; }

 private:
  std::ostream& out_;
  int passed_ = 0;
  int failed_ = 0;
};

// Runs every check of GOLDEN_DIR (needs GOLDEN_DIR/checkpoint, golden.safetensors and
// manifest.json). A missing or unreadable input is an error Status; failed comparisons are counted
// in the report.
Status run_golden_check(const std::string& golden_dir,
                        const backend::Ops& ops,
                        CheckReport& report);

}  // namespace di::check
