// GPT-2 byte <-> code point mapping.
#include "recipe/tokenizer/byte_level.h"

#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes take 256, 257, ... in order.
bool is_self_byte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMaps {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover the whole alphabet
  ByteMaps() {
    to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = is_self_byte(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      to_char[b] = c;
      to_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const ByteMaps& maps() {
  static const ByteMaps m;
  return m;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return maps().to_char[b];
}

std::optional<uint8_t> char_to_byte(char32_t cp) {
  if (cp >= maps().to_byte.size()) return std::nullopt;
  const int16_t b = maps().to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::optional<std::string> byte_level_decode_token(std::string_view token) {
  if (!is_valid_utf8(token)) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  const auto* p = reinterpret_cast<const uint8_t*>(token.data());
  const auto* e = p + token.size();
  while (p < e) {
    int len = 0;
    const char32_t cp = decode_utf8_valid(p, &len);
    const auto b = char_to_byte(cp);
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
    p += len;
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  for (const char ch : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(ch)));
  return out;
}

}  // namespace di::recipe
