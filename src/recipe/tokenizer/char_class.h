// Per-code-point character classes used by the pre-tokenizer and the added-token matcher:
// Unicode general-category groups (\p{L} \p{M} \p{N} \p{P} \p{S}), Oniguruma's \s, the CJK/kana
// class of DeepSeek's second split regex and a few ASCII sets. Built once from ICU and pinned to
// what HuggingFace tokenizers (Oniguruma, Unicode 16) does: Debian 12's ICU 72 is Unicode 15, so
// a generated override list (char_class_overrides.inc) supplies the differences.
#pragma once

#include <cstdint>
#include <vector>

namespace di::recipe {

enum CharClassBit : uint16_t {
  kClsL = 1 << 0,            // \p{L}
  kClsM = 1 << 1,            // \p{M}
  kClsN = 1 << 2,            // \p{N}
  kClsP = 1 << 3,            // \p{P}
  kClsS = 1 << 4,            // \p{S}
  kClsSpace = 1 << 5,        // Oniguruma \s (Unicode White_Space)
  kClsCjk = 1 << 6,          // [一-龥぀-ゟ゠-ヿ]
  kClsCrLf = 1 << 7,         // \r or \n
  kClsAsciiPunct = 1 << 8,   // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]
  kClsAsciiLetter = 1 << 9,  // [A-Za-z]
  kClsWordChar = 1 << 10,    // Rust char::is_alphanumeric() or '_' (added-token single_word)
};

// Two-level lookup table over all code points. Immutable after construction; shared.
class CharClassTable {
 public:
  uint16_t get(char32_t cp) const {
    if (cp < 0x80) return ascii_[cp];
    if (cp > 0x10FFFF) return 0;
    return blocks_[(static_cast<uint32_t>(index_[cp >> 8]) << 8) | (cp & 0xFF)];
  }
  uint16_t ascii(uint8_t c) const { return ascii_[c]; }

  // The process-wide table (built on first use; thread-safe initialization).
  static const CharClassTable& instance();

  // The classes ICU alone gives (before the oracle overrides); for the override generator.
  static uint16_t icu_class(char32_t cp);

 private:
  CharClassTable();
  uint16_t ascii_[128];
  std::vector<uint16_t> index_;   // [0x1100] block number per 256-code-point block
  std::vector<uint16_t> blocks_;  // [num_unique_blocks * 256] classes
};

// The classes that come from Unicode general categories / White_Space (bits 0-5); the rest are
// fixed sets. Overrides (char_class_overrides.inc) replace exactly these bits.
inline constexpr uint16_t kUnicodeClassBits = kClsL | kClsM | kClsN | kClsP | kClsS | kClsSpace;

}  // namespace di::recipe
