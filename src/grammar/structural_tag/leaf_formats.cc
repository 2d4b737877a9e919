// SPDX-License-Identifier: Apache-2.0
#include "grammar/structural_tag/leaf_formats.h"

#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

Expected<ExprId> regex_leaf(Grammar& g, const std::string& pattern, const std::string& prefix) {
  // Full match, as the regex response format (no JSON string escaping: the text is raw).
  auto sub = regex_to_grammar(pattern, RegexOptions{});
  if (!sub) return sub.status();
  return g.ref(g.import(*sub, prefix));
}

Expected<ExprId> ebnf_leaf(Grammar& g,
                           const std::string& text,
                           const TokenTrie* vocab,
                           const std::string& prefix) {
  auto sub = parse_ebnf(text, "root", vocab);
  if (!sub) return sub.status();
  return g.ref(g.import(*sub, prefix));
}

Expected<int32_t> token_leaf_id(const nlohmann::ordered_json& token, const TokenTrie* vocab) {
  if (vocab == nullptr)
    return invalid_argument("token formats need a vocabulary (compile for a tokenizer)");
  if (token.is_number_integer()) {
    const int64_t id = token.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= vocab->vocab_size())
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
    if (id == vocab->eos_id()) return invalid_argument("the EOS token cannot be a token format");
    return static_cast<int32_t>(id);
  }
  if (!token.is_string() || token.get<std::string>().empty())
    return invalid_argument("must be a token id or a non-empty token text");
  const int32_t id = vocab->find_token(token.get<std::string>());
  if (id < 0) return invalid_argument("no token has the text '" + token.get<std::string>() + "'");
  if (id == vocab->eos_id()) return invalid_argument("the EOS token cannot be a token format");
  return id;
}

}  // namespace di::grammar
