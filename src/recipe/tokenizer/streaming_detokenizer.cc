// Incremental UTF-8 assembly over token bytes.
#include "recipe/tokenizer/streaming_detokenizer.h"

#include "recipe/tokenizer/utf8.h"

namespace di::recipe {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

std::string StreamingDetokenizer::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_.append(tok_.token_bytes(id));
  const size_t hold = utf8_incomplete_suffix_len(pending_);
  const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - hold);
  std::string out = utf8_lossy(ready);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace di::recipe
