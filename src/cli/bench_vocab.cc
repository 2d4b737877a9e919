#include "cli/bench_vocab.h"

#include <string>

namespace di::cli {

Expected<grammar::Vocabulary> vocabulary_from_tokenizer(const recipe::Tokenizer& tok,
                                                        size_t vocab_size) {
  if (static_cast<size_t>(tok.vocab_size()) > vocab_size) {
    return invalid_argument("the tokenizer has " + std::to_string(tok.vocab_size()) +
                            " tokens, more than the vocabulary size " + std::to_string(vocab_size));
  }
  grammar::Vocabulary v;
  v.token_bytes.resize(vocab_size);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    v.token_bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
    if (tok.is_special(id)) v.special_ids.push_back(id);
  }
  v.eos_id = tok.token_to_id(
                    "<\xEF\xBD\x9C"
                    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")
                 .value_or(-1);
  return v;
}

}  // namespace di::cli
