// See token_map.h.
#include "model/engram/token_map.h"

#include <limits>
#include <unordered_map>

#include "model/engram/normalizer.h"

namespace di::engram {

Expected<std::string> token_class_key(std::string_view raw, std::string_view decoded) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  if (decoded.find(kReplacement) != std::string_view::npos) return std::string(raw);
  DI_ASSIGN_OR_RETURN(std::string normalized, engram_normalize(decoded));
  if (normalized.empty()) return std::string(decoded);
  return normalized;
}

Expected<CompressedTokenMap> build_compressed_token_map(const TokenTexts& texts) {
  if (texts.raw.size() != texts.decoded.size()) {
    return invalid_argument("token map: raw and decoded token lists differ in length");
  }
  if (texts.raw.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    return out_of_range("token map: vocabulary too large for int32 ids");
  }
  CompressedTokenMap map;
  map.lookup.reserve(texts.raw.size());
  std::unordered_map<std::string, int32_t> class_of;
  for (std::size_t id = 0; id < texts.raw.size(); ++id) {
    Expected<std::string> key = token_class_key(texts.raw[id], texts.decoded[id]);
    if (!key) return key.status().with_context("token map: token " + std::to_string(id));
    const auto [it, inserted] =
        class_of.try_emplace(std::move(key).value(), static_cast<int32_t>(class_of.size()));
    map.lookup.push_back(it->second);
  }
  map.num_classes = static_cast<int32_t>(class_of.size());
  return map;
}

Expected<CompressedTokenMap> build_compressed_token_map_from_json(std::string_view tokenizer_json) {
  DI_ASSIGN_OR_RETURN(const TokenTexts texts, load_token_texts(tokenizer_json));
  return build_compressed_token_map(texts);
}

Expected<CompressedTokenMap> build_compressed_token_map_from_file(
    const std::string& tokenizer_json_path) {
  DI_ASSIGN_OR_RETURN(const TokenTexts texts, load_token_texts_from_file(tokenizer_json_path));
  return build_compressed_token_map(texts);
}

}  // namespace di::engram
