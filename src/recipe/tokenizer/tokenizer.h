// Tokenizer: DeepSeek's byte-level BPE tokenizer, loaded from a HuggingFace tokenizer.json and
// bit-exact with HF tokenizers (encode with add_special_tokens=false; decode). Our own hot-path
// implementation: hand-compiled pre-tokenizer, ranked BPE merges and a per-thread word cache.
// Spec: shared/spec/recipe-tokenizer-grammar.md §B2, shared/spec/deepseek-v41-model.md §4.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace di::recipe {

// Whether text spelling an added token (e.g. "<｜User｜>") becomes that token when encoding.
//   kNone: never; the text is tokenized as ordinary characters. Use for untrusted content.
//   kAll:  every added token (special or not) is matched, as HF tokenizers does.
enum class SpecialTokens { kNone, kAll };

// Immutable after load; copies share one implementation. Thread-safe: any number of threads may
// encode/decode concurrently (the word cache is per thread).
//
// Input that is not valid UTF-8 is repaired before encoding: each maximal invalid subpart becomes
// U+FFFD (the same text Python's bytes.decode(errors="replace"), Rust's from_utf8_lossy and
// Node's Buffer.toString do), and that text is tokenized.
class Tokenizer {
 public:
  static Expected<Tokenizer> from_file(const std::string& path);
  static Expected<Tokenizer> from_json(std::string_view json_text);

  std::vector<int32_t> encode(std::string_view text,
                              SpecialTokens allow = SpecialTokens::kNone) const;
  // Concatenated token bytes (unknown ids are skipped; with skip_special, ids of tokens marked
  // special are skipped), then invalid UTF-8 -> U+FFFD like HF.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int32_t vocab_size() const;  // max id + 1, added tokens included
  // The raw bytes a token stands for (byte-level decoded; added tokens: their content). Empty
  // for an unknown id.
  std::string_view token_bytes(int32_t id) const;
  // By token string as in the vocab ("Ġworld") or an added token's content.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace di::recipe
