// SPDX-License-Identifier: Apache-2.0
// Regex front end (ECMAScript-like syntax, as JSON Schema's "pattern" uses). Lowers straight to the
// byte IR. Rejected with kUnimplemented: lookaround, backreferences, \b \B, \p{..}, anchors in
// the middle of a pattern.
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "util/status.h"

namespace di::grammar {

struct RegexOptions {
  // Match the JSON-serialized form of the string (inside the quotes) instead of raw UTF-8.
  bool json_string = false;
  // JSON Schema "pattern" semantics: the regex may match anywhere unless anchored with ^ / $.
  bool search = false;
};

// Returns an expression matching the whole input against the pattern.
Expected<ExprId> regex_to_expr(Grammar& g, std::string_view pattern, const RegexOptions& opts);

// Convenience: a grammar whose root is the pattern.
Expected<Grammar> regex_to_grammar(std::string_view pattern, const RegexOptions& opts = {});

}  // namespace di::grammar
