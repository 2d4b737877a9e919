// The Engram compressed token map (the reference's `build_compressed_token_map`): token
// ids whose decoded text normalizes to the same string share one class, so the n-gram
// hash sees "The", " the" and "THE" as one word and the hash tables stay small.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/engram/tokenizer_json.h"
#include "util/status.h"

namespace di::engram {

struct CompressedTokenMap {
  std::vector<int32_t> lookup;  // lookup[token id] = class, classes numbered by first use
  int32_t num_classes = 0;      // the engram compressed vocabulary size
};

// The class key of one token: its decoded text normalized (see normalizer.h), or the text
// itself if that normalizes to ""; a decoded text containing U+FFFD (a partial UTF-8
// character) uses the raw token string instead, keeping such byte pieces apart.
Expected<std::string> token_class_key(std::string_view raw, std::string_view decoded);

Expected<CompressedTokenMap> build_compressed_token_map(const TokenTexts& texts);
Expected<CompressedTokenMap> build_compressed_token_map_from_json(std::string_view tokenizer_json);
Expected<CompressedTokenMap> build_compressed_token_map_from_file(
    const std::string& tokenizer_json_path);

}  // namespace di::engram
