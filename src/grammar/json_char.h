// SPDX-License-Identifier: Apache-2.0
// Characters inside a JSON string literal: a class of code points lowered to the bytes a JSON
// serializer writes for them (raw UTF-8, or the escape for '"', '\\' and controls). Shared by
// the JSON Schema front end and the regex front end's JSON-string mode (schema "pattern").
#pragma once

#include "grammar/ir.h"
#include "grammar/utf8.h"

namespace di::grammar {

// Matches one character of `cls` as it appears inside a JSON string. Escapes accepted: the short
// forms \" \\ \/ \b \f \n \r \t and \u00XX for other controls; for ordinary characters only the raw
// form (what serializers emit), plus \uXXXX for every BMP code point when `allow_u_escapes`.
ExprId json_string_char(Grammar& g, const CharClass& cls, bool allow_u_escapes = false);

}  // namespace di::grammar
