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

// A token given as an id (a JSON integer) or as its exact text (a JSON string).
Expected<int32_t> token_leaf_id(const nlohmann::ordered_json& token, const TokenTrie* vocab);

}  // namespace di::grammar
