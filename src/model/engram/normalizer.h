// The text normalization under which the Engram module treats two tokens as the same
// "word" (the reference's normalizer Sequence, HuggingFace tokenizers normalizers):
//   NFKC -> NFD -> StripAccents -> Lowercase -> Replace(/[ \t\r\n]+/, " ")
//   -> Replace(/^ $/, U+E000) -> Strip -> Replace(U+E000, " ")
// so "Café", " cafe" and "CAFÉ" share one embedding-table class, while a lone space
// survives the Strip (protected by the U+E000 sentinel) and stays distinct from "".
// Unicode data comes from ICU.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace di::engram {

// Applies the sequence above to UTF-8 text (ill-formed input is an error).
Expected<std::string> engram_normalize(std::string_view utf8);

}  // namespace di::engram
