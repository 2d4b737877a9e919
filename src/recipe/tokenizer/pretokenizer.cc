// Hand-compiled scanners for DeepSeek's pre-tokenizer regexes.
#include "recipe/tokenizer/pretokenizer.h"

#include <string>

#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

// The patterns as they appear (after JSON unescaping) in DeepSeek V3's tokenizer.json.
const char kDigitsPattern[] = "\\p{N}{1,3}";
const char kCjkPattern[] =
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
const char kWordsPattern[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

// Reads one code point's class; the text is valid UTF-8.
struct Cursor {
  const CharClassTable& tab;
  uint16_t cls_at(const uint8_t* p, int* len) const {
    if (*p < 0x80) {
      *len = 1;
      return tab.ascii(*p);
    }
    return tab.get(decode_utf8_valid(p, len));
  }
  // End of the run of characters whose class intersects `mask`, starting at p.
  const uint8_t* run(const uint8_t* p, const uint8_t* e, uint16_t mask) const {
    while (p < e) {
      int len = 0;
      if (!(cls_at(p, &len) & mask)) break;
      p += len;
    }
    return p;
  }
};

// Splits [b, e) into matches and the gaps between them (behavior Isolated); `match` returns the
// end of a non-empty match at p, or nullptr.
template <class Match, class Emit>
void split_isolated(const uint8_t* b, const uint8_t* e, const Match& match, const Emit& emit) {
  const uint8_t* gap = b;
  const uint8_t* p = b;
  while (p < e) {
    const uint8_t* m = match(p, e);
    if (m == nullptr) {
      p += utf8_seq_len(*p);
      continue;
    }
    if (gap < p) emit(gap, p);
    emit(p, m);
    p = gap = m;
  }
  if (gap < e) emit(gap, e);
}

// \p{N}{1,3}
struct MatchDigits {
  Cursor c;
  const uint8_t* operator()(const uint8_t* p, const uint8_t* e) const {
    const uint8_t* q = p;
    for (int k = 0; k < 3 && q < e; ++k) {
      int len = 0;
      if (!(c.cls_at(q, &len) & kClsN)) break;
      q += len;
    }
    return q == p ? nullptr : q;
  }
};

// [一-龥぀-ゟ゠-ヿ]+
struct MatchCjk {
  Cursor c;
  const uint8_t* operator()(const uint8_t* p, const uint8_t* e) const {
    if (*p < 0x80) return nullptr;
    const uint8_t* q = c.run(p, e, kClsCjk);
    return q == p ? nullptr : q;
  }
};

// The six alternatives of DeepSeek V3's word regex, tried in order at p.
struct MatchWords {
  Cursor c;
  const uint8_t* operator()(const uint8_t* p, const uint8_t* e) const {
    int len0 = 0;
    const uint16_t cls0 = c.cls_at(p, &len0);
    const uint8_t* p1 = p + len0;
    int len1 = 0;
    const uint16_t cls1 = p1 < e ? c.cls_at(p1, &len1) : 0;
    // 1. [punct][A-Za-z]+
    if ((cls0 & kClsAsciiPunct) && (cls1 & kClsAsciiLetter)) {
      const uint8_t* q = p1 + 1;
      while (q < e && *q < 0x80 && (c.tab.ascii(*q) & kClsAsciiLetter)) ++q;
      return q;
    }
    // 2. [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if (!(cls0 & (kClsCrLf | kClsL | kClsP | kClsS)) && (cls1 & (kClsL | kClsM))) {
      return c.run(p1 + len1, e, kClsL | kClsM);
    }
    if (cls0 & (kClsL | kClsM)) return c.run(p1, e, kClsL | kClsM);
    // 3. ' '?[\p{P}\p{S}]+[\r\n]*
    const uint8_t* q = nullptr;
    if (*p == ' ' && (cls1 & (kClsP | kClsS))) {
      q = c.run(p1 + len1, e, kClsP | kClsS);
    } else if (cls0 & (kClsP | kClsS)) {
      q = c.run(p1, e, kClsP | kClsS);
    }
    if (q != nullptr) {
      while (q < e && (*q == '\r' || *q == '\n')) ++q;
      return q;
    }
    if (!(cls0 & kClsSpace)) return nullptr;
    // 4. \s*[\r\n]+  -> the whitespace run up to and including its last \r or \n.
    // 5. \s+(?!\S)   -> the whole run at the end of the piece, else all but its last character.
    // 6. \s+         -> a single whitespace character followed by non-whitespace.
    const uint8_t* last_crlf_end = nullptr;
    const uint8_t* last_start = p;
    q = p;
    while (q < e) {
      int len = 0;
      if (!(c.cls_at(q, &len) & kClsSpace)) break;
      if (*q == '\r' || *q == '\n') last_crlf_end = q + 1;
      last_start = q;
      q += len;
    }
    if (last_crlf_end != nullptr) return last_crlf_end;
    if (q == e) return q;
    if (last_start > p) return last_start;
    return q;
  }
};

}  // namespace

std::optional<SplitRule> split_rule_for_regex(std::string_view pattern) {
  if (pattern == kDigitsPattern) return SplitRule::kDigits1To3;
  if (pattern == kCjkPattern) return SplitRule::kCjkKanaRuns;
  if (pattern == kWordsPattern) return SplitRule::kDeepSeekV3Words;
  return std::nullopt;
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  if (text.empty()) return;
  const auto* b = reinterpret_cast<const uint8_t*>(text.data());
  split_stage(0, b, b, b + text.size(), out);
}

void PreTokenizer::split_stage(size_t stage,
                               const uint8_t* base,
                               const uint8_t* b,
                               const uint8_t* e,
                               std::vector<Piece>& out) const {
  if (stage == rules_.size()) {
    out.push_back({static_cast<size_t>(b - base), static_cast<size_t>(e - base)});
    return;
  }
  const Cursor cur{CharClassTable::instance()};
  const auto next = [&](const uint8_t* pb, const uint8_t* pe) {
    split_stage(stage + 1, base, pb, pe, out);
  };
  switch (rules_[stage]) {
    case SplitRule::kDigits1To3:
      split_isolated(b, e, MatchDigits{cur}, next);
      break;
    case SplitRule::kCjkKanaRuns:
      split_isolated(b, e, MatchCjk{cur}, next);
      break;
    case SplitRule::kDeepSeekV3Words:
      split_isolated(b, e, MatchWords{cur}, next);
      break;
  }
}

}  // namespace di::recipe
