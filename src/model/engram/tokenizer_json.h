// The minimum of a HuggingFace tokenizer.json that the Engram token map needs: for every
// token id, its raw token string (`id_to_token`) and its text when decoded on its own
// (`decode([id], skip_special_tokens=False)`). Supported: WordLevel and BPE models with no
// decoder or a ByteLevel decoder, plus added tokens; anything else is refused rather than
// guessed, since a wrong decode silently changes which tokens share an Engram class.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace di::engram {

struct TokenTexts {
  // Indexed by token id, for ids 0 .. len(tokenizer) - 1 (len counts distinct token
  // strings of the model vocabulary and the added tokens, as the library does). An id
  // that no token has gets "" for both, as the library's decode skips unknown ids.
  std::vector<std::string> raw;      // id_to_token(id): added tokens take precedence
  std::vector<std::string> decoded;  // decode([id]) with special tokens kept
};

Expected<TokenTexts> load_token_texts(std::string_view tokenizer_json);
Expected<TokenTexts> load_token_texts_from_file(const std::string& path);

}  // namespace di::engram
