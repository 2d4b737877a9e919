// SPDX-License-Identifier: Apache-2.0
// xgrammar's structural-tag leaf formats beyond const_string / json_schema / any_text (grammar8):
//   {"type": "regex", "pattern"}            the whole text of the format matches the pattern
//   {"type": "grammar", "grammar"}          an EBNF grammar (our EBNF dialect), rule `root`
//   {"type": "token", "token"}              one whole token, by id or by its exact text
//   {"type": "exclude_token", "exclude_tokens"}  any one text token but the ones listed
//   {"type": "any_tokens", "exclude_tokens"}     zero or more such tokens
// Token formats resolve through the vocabulary the grammar is compiled for (token terminals,
// ir.h kToken): without one, or for an id/text the vocabulary lacks, they are errors. A negated
// token terminal excludes a set (Grammar::token_except), so exclude_tokens may list any number.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/ir.h"
#include "grammar/vocabulary.h"
#include "util/status.h"

namespace di::grammar {

// The pattern as an expression of `g` (its rules imported under `prefix`).
Expected<ExprId> regex_leaf(Grammar& g, const std::string& pattern, const std::string& prefix);

// The EBNF grammar's rule `root` as an expression of `g`.
Expected<ExprId> ebnf_leaf(Grammar& g,
                           const std::string& text,
                           const TokenTrie* vocab,
                           const std::string& prefix);

// Counts the grammar unrolls (any_tokens' max_tokens): one NFA state per step.
inline constexpr int64_t kMaxUnrolled = 10000;
// States any_text's max_chars may build (leaf_formats.cc any_text_leaf).
inline constexpr int64_t kMaxBoundedTextStates = int64_t{1} << 17;

// any_text at `path`: free text in which no exclude occurs, closed by the first of `ends` (none:
// it runs to the end of the text). max_chars (-1: none) bounds it in code points, the end
// excluded: one state per (count, automaton node), so the product is bounded and a larger one
// is a 400 naming the field. max_tokens (-1: none) counts tokens, which a byte grammar can only
// do where the text is whole tokens: when it runs to the end of the text with no excludes and
// no max_chars (then any text tokens, at most that many); elsewhere a 400 naming the field.
Expected<ExprId> any_text_leaf(Grammar& g,
                               const std::vector<std::string>& ends,
                               std::vector<std::string> excludes,
                               int64_t max_chars,
                               int64_t max_tokens,
                               const std::string& path);

// A token given as an id (a JSON integer) or as its exact text (a JSON string).
Expected<int32_t> token_leaf_id(const nlohmann::ordered_json& token, const TokenTrie* vocab);

}  // namespace di::grammar
