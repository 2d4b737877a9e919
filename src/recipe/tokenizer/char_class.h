// Per-code-point character classes used by the pre-tokenizer and the added-token matcher:
// Unicode general-category groups (\p{L} \p{M} \p{N} \p{P} \p{S}), Oniguruma's \s, the CJK/kana
// class of DeepSeek's second split regex and a few ASCII sets. Built once from ICU and pinned to
// the Unicode version HuggingFace tokenizers (Oniguruma) uses, so results match the oracle.
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

 private:
  CharClassTable();
  uint16_t ascii_[128];
  std::vector<uint16_t> index_;   // [0x1100] block number per 256-code-point block
  std::vector<uint16_t> blocks_;  // [num_unique_blocks * 256] classes
};

// The Unicode version the tables are pinned to (characters assigned later are unassigned).
inline constexpr int kPinnedUnicodeMajor = 15;

}  // namespace di::recipe
