// SPDX-License-Identifier: Apache-2.0
#include "grammar/structural_tag/leaf_formats.h"

#include <algorithm>

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

Expected<ExprId> any_text_leaf(Grammar& g,
                               const std::vector<std::string>& ends,
                               std::vector<std::string> excludes,
                               int64_t max_chars,
                               int64_t max_tokens,
                               const std::string& path) {
  if (max_tokens >= 0) {
    if (!ends.empty() || !excludes.empty() || max_chars >= 0)
      return invalid_argument(
          path +
          ".max_tokens: cannot be enforced next to an enclosing end, excludes or "
          "max_chars (the grammar reads characters, and a token may straddle the end "
          "or an excluded string); use max_chars, or any_tokens with max_tokens");
    if (max_tokens > kMaxUnrolled)
      return invalid_argument(path + ".max_tokens: above " + std::to_string(kMaxUnrolled) +
                              " cannot be enforced (the grammar unrolls the count)");
    return g.repeat(g.token_except({}), 0, static_cast<int32_t>(max_tokens));
  }
  TagDispatchSpec spec;
  spec.loop = false;
  spec.stops = ends;
  spec.stop_eos = ends.empty();
  spec.max_chars = max_chars;
  if (max_chars >= 0) {
    // States: (max_chars + the longest end's length + 1) x automaton nodes (at most the
    // strings' total length + 1).
    int64_t nodes = 1, longest = 0;
    for (const std::string& s : ends)
      nodes += s.size(), longest = std::max<int64_t>(longest, s.size());
    for (const std::string& s : excludes) nodes += s.size();
    if ((max_chars + longest + 1) * nodes > kMaxBoundedTextStates)
      return invalid_argument(path + ".max_chars: " + std::to_string(max_chars) +
                              " cannot be enforced with these end and excluded strings (the "
                              "grammar needs a state per character and string prefix: at most " +
                              std::to_string(kMaxBoundedTextStates / nodes - longest - 1) +
                              " here)");
  }
  spec.excludes = std::move(excludes);
  return g.tag_dispatch(std::move(spec));
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
