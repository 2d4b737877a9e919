// See byte_level.h.
#include "model/engram/byte_level.h"

#include <array>
#include <cstdint>

namespace di::engram {
namespace {

constexpr char32_t kNoByte = 0xFFFFFFFF;

// GPT-2's alphabet: the printable Latin-1 bytes keep their code point; the remaining 68
// bytes (controls, space, DEL, NBSP, soft hyphen...) get U+0100, U+0101, ... in byte order,
// so that every byte has a visible, non-space character. Inverted here: char -> byte.
struct Alphabet {
  std::array<uint32_t, 0x180> byte_of{};  // code point -> byte, kNoByte if none
  Alphabet() {
    byte_of.fill(kNoByte);
    uint32_t next_extra = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_of[printable ? b : next_extra++] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet kAlphabet;
  return kAlphabet;
}

// Length of the well-formed UTF-8 prefix starting at `s[i]` that is still a possible
// start of a character (Unicode Table 3-7), and whether it completes the character.
struct Utf8Step {
  std::size_t length;  // bytes consumed (>= 1)
  bool valid;          // a whole character was read
};

Utf8Step utf8_step(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return {1, true};
  std::size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false};  // continuation byte or never-valid byte as a lead
  }
  std::size_t len = 1;
  for (std::size_t k = 0; k < need; ++k) {
    if (i + len >= s.size()) return {len, false};
    const uint8_t b = byte(i + len);
    const uint8_t min = k == 0 ? lo : 0x80;
    const uint8_t max = k == 0 ? hi : 0xBF;
    if (b < min || b > max) return {len, false};
    ++len;
  }
  return {len, true};
}

// Decodes one code point of known-valid UTF-8 at s[i]; advances i.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const Utf8Step step = utf8_step(s, i);
  const auto byte = [&](std::size_t k) { return static_cast<uint8_t>(s[k]); };
  char32_t cp = 0;
  switch (step.length) {
    case 1:
      cp = byte(i);
      break;
    case 2:
      cp = ((byte(i) & 0x1Fu) << 6) | (byte(i + 1) & 0x3Fu);
      break;
    case 3:
      cp = ((byte(i) & 0x0Fu) << 12) | ((byte(i + 1) & 0x3Fu) << 6) | (byte(i + 2) & 0x3Fu);
      break;
    default:
      cp = ((byte(i) & 0x07u) << 18) | ((byte(i + 1) & 0x3Fu) << 12) |
           ((byte(i + 2) & 0x3Fu) << 6) | (byte(i + 3) & 0x3Fu);
  }
  i += step.length;
  return step.valid ? cp : kNoByte;
}

}  // namespace

std::optional<std::string> byte_level_token_bytes(std::string_view token) {
  const Alphabet& a = alphabet();
  std::string bytes;
  std::size_t i = 0;
  while (i < token.size()) {
    const char32_t cp = next_code_point(token, i);
    if (cp == kNoByte || cp >= a.byte_of.size() || a.byte_of[cp] == kNoByte) return std::nullopt;
    bytes.push_back(static_cast<char>(a.byte_of[cp]));
  }
  return bytes;
}

std::string byte_level_decode_token(std::string_view token) {
  const std::optional<std::string> bytes = byte_level_token_bytes(token);
  return utf8_lossy(bytes ? std::string_view(*bytes) : token);
}

std::string utf8_lossy(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, i);
    if (step.valid) {
      out.append(bytes.substr(i, step.length));
    } else {
      out.append(kReplacement);
    }
    i += step.length;
  }
  return out;
}

}  // namespace di::engram
