// Decoding of token strings back to text, as HuggingFace tokenizers' ByteLevel decoder
// does: GPT-2's byte-to-printable-character alphabet reversed, then a lossy UTF-8 decode.
// A single token of a byte-level BPE is often part of a multi-byte character; such a
// token decodes to U+FFFD, which is what lets the Engram token map recognise it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace di::engram {

// The bytes a byte-level token string stands for, or nullopt if some character of it is
// outside the 256-character alphabet (the decoder then uses the token's own UTF-8 bytes).
// `token` must be valid UTF-8; invalid UTF-8 also yields nullopt.
std::optional<std::string> byte_level_token_bytes(std::string_view token);

// ByteLevel decoding of one token: the mapped bytes, or the token itself when it is not
// made of alphabet characters, then decoded with utf8_lossy.
std::string byte_level_decode_token(std::string_view token);

// Rust's String::from_utf8_lossy: every maximal prefix of an ill-formed sequence (or a
// lone bad byte) becomes one U+FFFD; well-formed parts are copied unchanged.
std::string utf8_lossy(std::string_view bytes);

}  // namespace di::engram
