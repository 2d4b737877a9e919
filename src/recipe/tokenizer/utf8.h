// UTF-8 helpers for the tokenizer: validation, lossy repair and decoding of valid text.
// Lossy repair follows the Unicode "maximal subpart" practice (Unicode 15 §3.9, Table 3-7), which
// is what Rust's String::from_utf8_lossy and Node's Buffer.toString('utf8') do, so our output
// matches HuggingFace tokenizers byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace di::recipe {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte starts, assuming the text is valid UTF-8.
inline int utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point at p; the text must be valid UTF-8. Sets *len to its byte length.
inline char32_t decode_utf8_valid(const uint8_t* p, int* len) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *len = 2;
    return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    *len = 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *len = 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Length of the well-formed sequence starting at s[i], or 0 if the bytes there are not a complete
// well-formed sequence. *subpart receives the length of the maximal subpart (>= 1) when invalid.
int utf8_well_formed_len(std::string_view s, size_t i, int* subpart);

bool is_valid_utf8(std::string_view s);

// Appends s to out, replacing each maximal invalid subpart with U+FFFD.
void append_utf8_lossy(std::string& out, std::string_view s);

inline std::string utf8_lossy(std::string_view s) {
  std::string out;
  append_utf8_lossy(out, s);
  return out;
}

// Length of a trailing suffix of s that is a proper prefix of a well-formed sequence (0-3): bytes
// a streaming decoder must hold back because the next bytes may complete them.
size_t utf8_incomplete_suffix_len(std::string_view s);

void append_utf8(std::string& out, char32_t cp);

}  // namespace di::recipe
