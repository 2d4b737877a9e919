// StreamingDetokenizer: turns generated ids into text incrementally for one sequence. Holds back
// the bytes of a UTF-8 character split across tokens, so every chunk it returns is valid UTF-8
// and the concatenation of all chunks (plus flush()) equals Tokenizer::decode of all ids.
#pragma once

#include <cstdint>
#include <string>

#include "recipe/tokenizer/tokenizer.h"

namespace di::recipe {

// One per sequence; not thread-safe (a sequence is detokenized by one thread at a time).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = false);

  // Returns the newly completed text (possibly empty); never a partial UTF-8 character.
  std::string push(int32_t id);
  // Whatever remains (an incomplete trailing sequence becomes U+FFFD); resets the state.
  std::string flush();

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::string pending_;  // bytes not yet returned: a proper prefix of a UTF-8 sequence
};

}  // namespace di::recipe
