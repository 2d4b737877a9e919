// Private: the immutable state behind Tokenizer, filled by the loader (tokenizer_loader.cc).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "recipe/tokenizer/added_tokens.h"
#include "recipe/tokenizer/bpe_model.h"
#include "recipe/tokenizer/pretokenizer.h"
#include "recipe/tokenizer/tokenizer.h"

namespace di::recipe {

struct Tokenizer::Impl {
  uint64_t uid = 0;  // unique per loaded tokenizer; keys the per-thread word caches
  PreTokenizer pretokenizer;
  BpeModel bpe;
  bool ignore_merges = false;                            // whole-piece vocab hits skip merges
  std::unordered_map<std::string, int32_t> bytes_to_id;  // raw bytes -> vocab id (ignore_merges)
  AddedTokenMatcher added;
  std::unordered_map<std::string, int32_t> token_to_id;  // vocab strings and added contents
  // Per id: token bytes at token_data[token_offset[id] .. token_offset[id + 1]).
  std::string token_data;
  std::vector<uint32_t> token_offset;
  std::vector<uint8_t> token_known;    // 1 if the id exists
  std::vector<uint8_t> token_special;  // 1 if an added token marked special
};

}  // namespace di::recipe
