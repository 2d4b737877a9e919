// The GPT-2 byte-level alphabet: every byte maps to one printable code point, so a token string
// in tokenizer.json ("Ġworld") spells a byte string (" world"). Used by the loader (to turn vocab
// strings into bytes) and by decoding (HF's ByteLevel decoder).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace di::recipe {

// The code point byte b is written as in token strings.
char32_t byte_to_char(uint8_t b);

// The byte a code point stands for, or nullopt if it is not in the alphabet.
std::optional<uint8_t> char_to_byte(char32_t cp);

// HF's ByteLevel decoder for one token: if every character of `token` (UTF-8) is in the alphabet,
// the bytes they stand for; otherwise the token's own UTF-8 bytes unchanged. nullopt if `token` is
// not valid UTF-8.
std::optional<std::string> byte_level_decode_token(std::string_view token);

// The byte-level spelling of raw bytes (used to look up vocab entries and in tests).
std::string byte_level_encode(std::string_view bytes);

}  // namespace di::recipe
