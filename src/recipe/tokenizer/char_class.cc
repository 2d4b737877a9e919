// Builds the character class table from ICU general categories and binary properties.
#include "recipe/tokenizer/char_class.h"

#include <unicode/uchar.h>

#include <cstring>
#include <map>

namespace di::recipe {
namespace {

// Code points whose Unicode class bits differ between ICU 72 and the oracle, as ranges.
struct ClassOverride {
  uint32_t first, last;
  uint16_t bits;  // replaces the kUnicodeClassBits part
};
constexpr ClassOverride kOverrides[] = {
#include "recipe/tokenizer/char_class_overrides.inc"
    {1, 0, 0},  // empty sentinel (first > last)
};

uint16_t fixed_class(UChar32 c) {
  uint16_t cls = 0;
  if (c == '\r' || c == '\n') cls |= kClsCrLf;
  if ((c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) || (c >= 0x30A0 && c <= 0x30FF))
    cls |= kClsCjk;
  if (c < 0x80) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) cls |= kClsAsciiLetter;
    if (c > 0x20 && c < 0x7F && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) != nullptr)
      cls |= kClsAsciiPunct;
  }
  if (c == '_') cls |= kClsWordChar;
  return cls;
}

uint16_t unicode_class(UChar32 c) {
  uint16_t cls = 0;
  const uint32_t mask = U_MASK(u_charType(c));
  if (mask & U_GC_L_MASK) cls |= kClsL;
  if (mask & U_GC_M_MASK) cls |= kClsM;
  if (mask & U_GC_N_MASK) cls |= kClsN;
  if (mask & U_GC_P_MASK) cls |= kClsP;
  if (mask & U_GC_S_MASK) cls |= kClsS;
  if (u_hasBinaryProperty(c, UCHAR_WHITE_SPACE)) cls |= kClsSpace;
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (mask & U_GC_N_MASK)) cls |= kClsWordChar;
  return cls;
}

}  // namespace

uint16_t CharClassTable::icu_class(char32_t cp) {
  return fixed_class(static_cast<UChar32>(cp)) | unicode_class(static_cast<UChar32>(cp));
}

CharClassTable::CharClassTable() {
  std::vector<uint16_t> all(0x110000);
  for (UChar32 c = 0; c < 0x110000; ++c) all[c] = icu_class(static_cast<char32_t>(c));
  for (const ClassOverride& o : kOverrides) {
    for (uint32_t c = o.first; c <= o.last; ++c) {
      all[c] = static_cast<uint16_t>((all[c] & ~kUnicodeClassBits) | o.bits);
    }
  }
  for (UChar32 c = 0; c < 0x80; ++c) ascii_[c] = all[c];
  index_.resize(0x1100);
  std::map<std::vector<uint16_t>, uint16_t> unique;
  std::vector<uint16_t> block(256);
  for (uint32_t hi = 0; hi < 0x1100; ++hi) {
    for (uint32_t lo = 0; lo < 256; ++lo) {
      block[lo] = all[(hi << 8) | lo];
    }
    auto [it, inserted] = unique.try_emplace(block, static_cast<uint16_t>(unique.size()));
    if (inserted) blocks_.insert(blocks_.end(), block.begin(), block.end());
    index_[hi] = it->second;
  }
}

const CharClassTable& CharClassTable::instance() {
  static const CharClassTable table;
  return table;
}

}  // namespace di::recipe
