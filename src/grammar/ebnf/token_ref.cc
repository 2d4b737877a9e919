// SPDX-License-Identifier: Apache-2.0
#include "grammar/ebnf/token_ref.h"

#include <string>

namespace di::grammar {

Expected<int32_t> resolve_token_ref(std::string_view ref, const TokenTrie* vocab) {
  const std::string quoted = "token reference '" + std::string(ref) + "'";
  if (vocab == nullptr)
    return invalid_argument(quoted + " needs a vocabulary (compile the grammar for a tokenizer)");
  const std::string_view inner = ref.substr(1, ref.size() - 2);
  if (inner.size() >= 2 && inner.front() == '[' && inner.back() == ']') {
    const std::string_view digits = inner.substr(1, inner.size() - 2);
    int64_t id = 0;
    for (char c : digits) {
      if (c < '0' || c > '9' || id > (int64_t{1} << 31))
        return invalid_argument(quoted + ": bad id");
      id = id * 10 + (c - '0');
    }
    if (digits.empty()) return invalid_argument(quoted + ": bad id");
    if (static_cast<size_t>(id) >= vocab->vocab_size())
      return invalid_argument(quoted + ": id outside the vocabulary (size " +
                              std::to_string(vocab->vocab_size()) + ")");
    return static_cast<int32_t>(id);
  }
  const int32_t id = vocab->find_token(ref);
  if (id < 0) return invalid_argument(quoted + ": no token has this text");
  return id;
}

}  // namespace di::grammar
