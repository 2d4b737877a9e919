// Hand-compiled scanners for DeepSeek's pre-tokenizer regexes. The text is decoded once into
// per-character classes; every split stage then scans that array.
#include "recipe/tokenizer/pretokenizer.h"

#include <string>

#include "recipe/tokenizer/utf8.h"

namespace di::recipe {

// The decoded text: for character i, its byte offset and classes (offset[n] = text size).
struct PreTokenizer::Chars {
  std::vector<uint32_t> offset;
  std::vector<uint16_t> cls;
  uint16_t all_cls = 0;  // union of all characters' classes
  const uint8_t* bytes = nullptr;
};

namespace {

// The patterns as they appear (after JSON unescaping) in DeepSeek V3's tokenizer.json.
const char kDigitsPattern[] = "\\p{N}{1,3}";
const char kCjkPattern[] =
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
const char kWordsPattern[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

constexpr uint32_t kNoMatch = UINT32_MAX;

using Chars = PreTokenizer::Chars;

// End of the run of characters from i whose classes intersect `mask`.
inline uint32_t run(const uint16_t* cls, uint32_t i, uint32_t e, uint16_t mask) {
  while (i < e && (cls[i] & mask)) ++i;
  return i;
}

// Splits characters [b, e) into matches and the gaps between them (behavior Isolated); `match`
// returns the end of a non-empty match at i, or kNoMatch. If Match::kStart is not 0, a match can
// only start at a character whose classes intersect it, so other characters are skipped fast.
template <class Match, class Emit>
void split_isolated(uint32_t b, uint32_t e, const Match& match, const Emit& emit) {
  uint32_t gap = b;
  uint32_t i = b;
  while (i < e) {
    if constexpr (Match::kStart != 0) {
      while (i < e && !(match.cls[i] & Match::kStart)) ++i;
    }
    if (i == e) break;
    const uint32_t m = match(i, e);
    if (m == kNoMatch) {
      ++i;
      continue;
    }
    if (gap < i) emit(gap, i);
    emit(i, m);
    i = gap = m;
  }
  if (gap < e) emit(gap, e);
}

// \p{N}{1,3}
struct MatchDigits {
  static constexpr uint16_t kStart = kClsN;
  const uint16_t* cls;
  uint32_t operator()(uint32_t i, uint32_t e) const {
    uint32_t q = i;
    while (q < e && q - i < 3 && (cls[q] & kClsN)) ++q;
    return q == i ? kNoMatch : q;
  }
};

// [一-龥぀-ゟ゠-ヿ]+
struct MatchCjk {
  static constexpr uint16_t kStart = kClsCjk;
  const uint16_t* cls;
  uint32_t operator()(uint32_t i, uint32_t e) const {
    const uint32_t q = run(cls, i, e, kClsCjk);
    return q == i ? kNoMatch : q;
  }
};

// The six alternatives of DeepSeek V3's word regex, tried in order at character i.
struct MatchWords {
  static constexpr uint16_t kStart = 0;  // alternative 2 can start at any character
  const uint16_t* cls;
  const uint8_t* first_byte;  // first byte of character i is first_byte[offset[i]]
  const uint32_t* offset;
  bool is(uint32_t i, uint8_t c) const { return first_byte[offset[i]] == c; }
  uint32_t operator()(uint32_t i, uint32_t e) const {
    const uint16_t c0 = cls[i];
    const uint16_t c1 = i + 1 < e ? cls[i + 1] : 0;
    // 1. [punct][A-Za-z]+
    if ((c0 & kClsAsciiPunct) && (c1 & kClsAsciiLetter)) return run(cls, i + 2, e, kClsAsciiLetter);
    // 2. [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if (!(c0 & (kClsCrLf | kClsL | kClsP | kClsS)) && (c1 & (kClsL | kClsM))) {
      return run(cls, i + 2, e, kClsL | kClsM);
    }
    if (c0 & (kClsL | kClsM)) return run(cls, i + 1, e, kClsL | kClsM);
    // 3. ' '?[\p{P}\p{S}]+[\r\n]*
    uint32_t q = kNoMatch;
    if ((c1 & (kClsP | kClsS)) && is(i, ' ')) {
      q = run(cls, i + 2, e, kClsP | kClsS);
    } else if (c0 & (kClsP | kClsS)) {
      q = run(cls, i + 1, e, kClsP | kClsS);
    }
    if (q != kNoMatch) return run(cls, q, e, kClsCrLf);
    if (!(c0 & kClsSpace)) return kNoMatch;
    // 4. \s*[\r\n]+  -> the whitespace run up to and including its last \r or \n.
    // 5. \s+(?!\S)   -> the whole run at the end of the piece, else all but its last character.
    // 6. \s+         -> a single whitespace character followed by non-whitespace.
    q = run(cls, i, e, kClsSpace);
    for (uint32_t k = q; k > i; --k) {
      if (cls[k - 1] & kClsCrLf) return k;
    }
    if (q == e) return q;
    if (q - 1 > i) return q - 1;
    return q;
  }
};

void decode(std::string_view text, Chars& chars) {
  const CharClassTable& tab = CharClassTable::instance();
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  chars.bytes = p;
  chars.offset.resize(n + 1);
  chars.cls.resize(n + 1);
  uint32_t* off = chars.offset.data();
  uint16_t* cls = chars.cls.data();
  size_t count = 0;
  uint16_t all = 0;
  for (size_t i = 0; i < n;) {
    off[count] = static_cast<uint32_t>(i);
    uint16_t c;
    if (p[i] < 0x80) {
      c = tab.ascii(p[i]);
      ++i;
    } else {
      int len = 0;
      c = tab.get(decode_utf8_valid(p + i, &len));
      i += static_cast<size_t>(len);
    }
    cls[count++] = c;
    all |= c;
  }
  chars.all_cls = all;
  off[count] = static_cast<uint32_t>(n);
  chars.offset.resize(count + 1);
  chars.cls.resize(count);
}

}  // namespace

std::optional<SplitRule> split_rule_for_regex(std::string_view pattern) {
  if (pattern == kDigitsPattern) return SplitRule::kDigits1To3;
  if (pattern == kCjkPattern) return SplitRule::kCjkKanaRuns;
  if (pattern == kWordsPattern) return SplitRule::kDeepSeekV3Words;
  return std::nullopt;
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  if (text.empty()) return;
  if (text.size() >= UINT32_MAX) {
    // Character offsets are 32-bit: a text of 4 GiB or more is split in 2 GiB blocks first (not
    // exact at the block boundaries; such inputs are far beyond any context length).
    for (size_t b = 0; b < text.size(); b += (size_t{1} << 31)) {
      std::vector<Piece> sub;
      split(text.substr(b, std::min(text.size() - b, size_t{1} << 31)), sub);
      for (const Piece& pc : sub) out.push_back({pc.begin + b, pc.end + b});
    }
    return;
  }
  thread_local Chars chars;
  decode(text, chars);
  split_stage(0, chars, 0, static_cast<uint32_t>(chars.cls.size()), out);
}

void PreTokenizer::split_stage(
    size_t stage, const Chars& chars, uint32_t b, uint32_t e, std::vector<Piece>& out) const {
  if (stage == rules_.size()) {
    out.push_back({chars.offset[b], chars.offset[e]});
    return;
  }
  const auto next = [&](uint32_t pb, uint32_t pe) { split_stage(stage + 1, chars, pb, pe, out); };
  const uint16_t* cls = chars.cls.data();
  switch (rules_[stage]) {
    case SplitRule::kDigits1To3:
      if (!(chars.all_cls & kClsN)) return next(b, e);  // nothing can match anywhere
      split_isolated(b, e, MatchDigits{cls}, next);
      break;
    case SplitRule::kCjkKanaRuns:
      if (!(chars.all_cls & kClsCjk)) return next(b, e);
      split_isolated(b, e, MatchCjk{cls}, next);
      break;
    case SplitRule::kDeepSeekV3Words:
      split_isolated(b, e, MatchWords{cls, chars.bytes, chars.offset.data()}, next);
      break;
  }
}

}  // namespace di::recipe
