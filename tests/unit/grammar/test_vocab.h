// SPDX-License-Identifier: Apache-2.0
// Small vocabularies and helpers shared by the grammar tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/matcher.h"

namespace di::grammar::testing {

// id 0 = EOS; then all single bytes; then a few multi-byte tokens.
inline Vocabulary small_vocab() {
  Vocabulary v;
  v.token_bytes.push_back("</s>");
  v.special_ids = {0};
  v.eos_id = 0;
  for (int b = 1; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"ab", "abc", "\"a", "\",", "{\"", "\":", "true", "null", "12", "a\"", "  ",
                        "\n", "ba", "aaa", "\xC3\xA9", "x\"}", ""})
    v.token_bytes.push_back(s);
  return v;
}

inline std::shared_ptr<const CompiledGrammar> compile_ebnf(const std::string& text,
                                                           const Vocabulary& v) {
  auto g = parse_ebnf(text);
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(v));
  if (!cg) return nullptr;
  return *cg;
}

inline bool matches(const std::shared_ptr<const CompiledGrammar>& cg, const std::string& s) {
  GrammarMatcher m(cg);
  return m.accept_bytes(s) && m.can_terminate();
}

}  // namespace di::grammar::testing
