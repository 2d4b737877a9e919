// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the structural-tag tests: compile a structural tag over the small test
// vocabulary, get the error a bad one gives, and the one-format tag of a json_schema style.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/structural_tag/structural_tag.h"
#include "test_vocab.h"

namespace di::grammar::testing {

// Built once per test binary: every structural-tag test compiles against the same trie.
inline std::shared_ptr<const TokenTrie> small_trie() {
  static const auto t = TokenTrie::build(small_vocab());
  return t;
}

// The structural tag `json` compiled, or null (with a test failure naming the error).
inline std::shared_ptr<const CompiledGrammar> compile_tag(const std::string& json) {
  auto g = structural_tag_to_grammar(json, {}, small_trie().get());
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, small_trie());
  EXPECT_TRUE(cg.has_value());
  return cg ? *cg : nullptr;
}

// The message a structural tag that must be refused gives ("" if it compiled).
inline std::string tag_error(const std::string& json) {
  auto g = structural_tag_to_grammar(json, {}, small_trie().get());
  return g ? "" : g.status().message();
}

// A tag whose format is the json_schema `schema` (JSON text) written in `style`.
inline std::string styled_tag(const std::string& style, const std::string& schema) {
  return R"({"format": {"type": "json_schema", "style": ")" + style + R"(", "json_schema": )" +
         schema + "}}";
}

inline std::shared_ptr<const CompiledGrammar> styled(const std::string& style,
                                                     const std::string& schema) {
  return compile_tag(styled_tag(style, schema));
}

}  // namespace di::grammar::testing
