// The pre-tokenizer: a Sequence of regex Splits (behavior Isolated) as in DeepSeek's
// tokenizer.json, each hand-compiled into a scanner over code points instead of run by a regex
// engine. Only the patterns DeepSeek uses are known; others are refused at load time.
// Semantics follow Oniguruma (leftmost match, ordered alternation with backtracking), and each
// split applies within the pieces of the previous one (a piece end is end-of-input for lookahead).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "recipe/tokenizer/char_class.h"

namespace di::recipe {

enum class SplitRule {
  kDigits1To3,       // \p{N}{1,3}
  kCjkKanaRuns,      // [一-龥぀-ゟ゠-ヿ]+
  kDeepSeekV3Words,  // [punct][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ | ... | \s+
};

// The rule a Split regex pattern (exactly as written in tokenizer.json) compiles to.
std::optional<SplitRule> split_rule_for_regex(std::string_view pattern);

// A piece of the input: [begin, end) byte offsets.
struct Piece {
  size_t begin;
  size_t end;
};

// Immutable; safe to share between threads.
class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitRule> rules) : rules_(std::move(rules)) {}

  // Appends the pieces of `text` (valid UTF-8) to `out`, offsets relative to `text`.
  // Pieces are non-empty, in order, and cover the text.
  void split(std::string_view text, std::vector<Piece>& out) const;

  const std::vector<SplitRule>& rules() const { return rules_; }

  struct Chars;  // the text decoded to per-character classes (private to the .cc)

 private:
  void split_stage(
      size_t stage, const Chars& chars, uint32_t b, uint32_t e, std::vector<Piece>& out) const;

  std::vector<SplitRule> rules_;
};

}  // namespace di::recipe
