// Builds the character class table from ICU general categories and binary properties.
#include "recipe/tokenizer/char_class.h"

#include <unicode/uchar.h>

#include <cstring>
#include <map>

namespace di::recipe {
namespace {

// Oniguruma's Unicode tables can lag ICU's; a character assigned after the pinned version is
// treated as unassigned (general category Cn, no properties).
bool assigned_in_pinned_version(UChar32 c) {
  UVersionInfo age;
  u_charAge(c, age);
  return age[0] != 0 && age[0] <= kPinnedUnicodeMajor;
}

uint16_t compute_class(UChar32 c) {
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
  if (!assigned_in_pinned_version(c)) {
    // Unassigned in the pinned tables; White_Space never changes for old characters.
    return cls;
  }
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

CharClassTable::CharClassTable() {
  for (UChar32 c = 0; c < 0x80; ++c) ascii_[c] = compute_class(c);
  index_.resize(0x1100);
  std::map<std::vector<uint16_t>, uint16_t> unique;
  std::vector<uint16_t> block(256);
  for (uint32_t hi = 0; hi < 0x1100; ++hi) {
    for (uint32_t lo = 0; lo < 256; ++lo) {
      block[lo] = compute_class(static_cast<UChar32>((hi << 8) | lo));
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
