// SPDX-License-Identifier: Apache-2.0
// Lark-lite front end: the subset of Lark grammars vLLM/SGLang users send as `grammar`, read
// scannerless (a terminal is just its language; Lark's lexer conflicts are not modeled).
// Supported: rules `name: alt | alt` (`?`/`!` modifiers, `.N` priorities and `-> alias` are
// accepted and do not change the language), terminals `NAME: "x" | /re/ | "a".."z" | OTHER`,
// `( )`, `[ ]`, `? * +`, `~ n`, `~ n..m`, `//` comments, `%import common.X` / `%import common
// (X, Y)` for common.lark's number, letter, word, whitespace and ESCAPED_STRING terminals, and
// `%ignore` (the ignored language may come before every terminal of a rule and at the end).
// Rejected with a message naming the construct: templates, terminal priorities, string/regex
// flags, other %-directives and imports.
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "util/status.h"

namespace di::grammar {

Expected<Grammar> parse_lark(std::string_view text, std::string_view start = "start");

// vLLM's test: a grammar without `::=` is Lark.
bool looks_like_lark(std::string_view text);

}  // namespace di::grammar
