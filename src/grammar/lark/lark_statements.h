// SPDX-License-Identifier: Apache-2.0
// Lark-lite text to logical statements (lark_parser.h): one definition or %directive each.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace di::grammar::lark {

struct LarkError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws LarkError("lark: line N: what").
[[noreturn]] void fail(int line, const std::string& what);

struct Statement {
  std::string text;
  int line = 0;
};

// `//` comments removed; `|`-continuation lines and lines inside ( ) or [ ] joined; strings
// and regexes copied as written.
std::vector<Statement> split(std::string_view text);

// Lark: a name is a terminal when its first letter (after leading underscores) is uppercase.
bool terminal_name(std::string_view name);
bool name_char(char c);

// A %ignore (its statement appended to `ignores`) or `%import common.X` / `%import common (X,
// Y)` (names added to `imported`; `is_common` says which are known); other directives refused.
void directive(const Statement& s,
               std::vector<Statement>& ignores,
               std::set<std::string>& imported,
               const std::function<bool(const std::string&)>& is_common);

// `%override DEF` / `%extend DEF`: the definition statement they carry (nullopt: another
// statement). `%declare` (terminals a post-lexer emits, e.g. an Indenter's _INDENT) is refused
// by directive(): no text spells those terminals, so no byte-level grammar can.
struct Modifier {
  bool override_ = false;
  Statement def;
};
std::optional<Modifier> modifier(const Statement& s);

// The name a definition statement `[?!]name[.N][{params}]: ...` defines.
std::string defined_name(const Statement& s);

// The pattern of the /regex/ starting at text[pos] (escaped '/' unescaped); pos ends after
// it. Flags (/.../i) are refused.
std::string regex_literal(const std::string& text, size_t& pos, int line);

// common.lark's definition of `name` (lark_common.h), or "" when it has none.
std::string common_line(const std::string& name);

// The string literal starting at text[pos] (a '"'), Python escapes decoded; pos ends after it.
// `"..."i` (case-insensitive) is refused.
std::string string_literal(const std::string& text, size_t& pos, int line);

}  // namespace di::grammar::lark
