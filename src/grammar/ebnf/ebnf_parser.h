// SPDX-License-Identifier: Apache-2.0
// EBNF front end: xgrammar's GBNF-style dialect (shared/spec/recipe-tokenizer-grammar.md §A6),
// plus llama.cpp's `.` wildcard. Lowers straight to the byte-level IR.
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "grammar/vocabulary.h"
#include "util/status.h"

namespace di::grammar {

// Parses `text`; `root` names the entry rule. Errors carry line:column. GBNF token terminals
// (`<[id]>`, `<think>`, `!<...>`, token_ref.h) resolve through `vocab`; without one they are an
// error. xgrammar's TagDispatch(...) macro becomes a TagDispatch (ir.h; stop_eos=true only).
// Not supported yet (kUnimplemented): Token/ExcludeToken macros. Lookahead
// assertions `(= ...)` and rule options `name[...]` are parsed and ignored: both only narrow or
// annotate the language.
Expected<Grammar> parse_ebnf(std::string_view text,
                             std::string_view root = "root",
                             const TokenTrie* vocab = nullptr);

}  // namespace di::grammar
