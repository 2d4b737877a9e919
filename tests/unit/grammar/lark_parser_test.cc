// SPDX-License-Identifier: Apache-2.0
// Lark-lite front end (lark/lark_parser.h): the supported subset by membership, and the
// constructs it refuses, each named.
#include "grammar/lark/lark_parser.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace di::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& text) {
  auto g = parse_lark(text);
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(testing::small_vocab()));
  EXPECT_TRUE(cg.has_value()) << cg.status().message();
  return cg ? *cg : nullptr;
}

std::string error_of(const std::string& text) {
  auto g = parse_lark(text);
  return g ? "" : g.status().message();
}

TEST(grammar_lark, RulesTerminalsAndOperators) {
  auto cg = compile(R"lark(// a call list
?start: call ("," call)*
call: NAME "(" [args] ")"   -> invoke
    | NAME "!" ~ 2..3
args: NUMBER | STRING
NAME: /[a-z]+/
NUMBER: DIGIT+ | "0x" HEX~2
HEX: "0".."9" | "a".."f"
STRING: "'" /[^']*/ "'"
%import common.DIGIT
)lark");
  ASSERT_TRUE(cg);
  using testing::matches;
  EXPECT_TRUE(matches(cg, "f()"));
  EXPECT_TRUE(matches(cg, "f(12),g('x y'),h!!,k!!!"));
  EXPECT_TRUE(matches(cg, "f(0xa9)"));
  EXPECT_FALSE(matches(cg, "f(0xa)"));
  EXPECT_FALSE(matches(cg, "f!"));
  EXPECT_FALSE(matches(cg, "F()"));
  EXPECT_FALSE(matches(cg, "f(1) "));  // no %ignore: no whitespace
}

TEST(grammar_lark, IgnoreAndCommonTerminals) {
  auto cg = compile(R"lark(
start: pair+
pair: CNAME "=" value ";"
value: SIGNED_NUMBER | ESCAPED_STRING | "[" [value ("," value)*] "]"
%import common (CNAME, SIGNED_NUMBER, ESCAPED_STRING)
%import common.WS
%ignore WS
)lark");
  ASSERT_TRUE(cg);
  using testing::matches;
  EXPECT_TRUE(matches(cg, "a=1;"));
  EXPECT_TRUE(matches(cg, "  a = -1.5e3 ;\n b_2=[\"x\\\"y\", [ ] ,2];  "));
  EXPECT_FALSE(matches(cg, "a=1"));
  EXPECT_FALSE(matches(cg, "a b=1;"));  // WS goes between terminals, not inside CNAME
  EXPECT_FALSE(matches(cg, "a=\"x\"y\";"));
}

// grammar8: templates, expanded per argument list as Lark does.
TEST(grammar_lark, Templates) {
  auto cg = compile(R"lark(start: _separated{item, ","} ";" _separated{NUMBER, _sep2} ";" pair{"x"}
_separated{x, sep}: x (sep x)*
_sep2: "-" | "+"
pair{a}: "(" _separated{a, "|"} ")"
item: "a" | "b"
%import common.NUMBER
)lark");
  ASSERT_TRUE(cg);
  using testing::matches;
  EXPECT_TRUE(matches(cg, "a,b,a;1-2+3;(x|x)"));
  EXPECT_TRUE(matches(cg, "b;7;(x)"));
  EXPECT_FALSE(matches(cg, "a,;1;(x)"));
  EXPECT_FALSE(matches(cg, "a;1,2;(x)"));
  EXPECT_FALSE(matches(cg, "a;1;(x,x)"));
  // A template that calls itself with its own parameters (one instance per argument list).
  auto rec = compile("start: nest{\"a\"}\nnest{v}: v | \"[\" nest{v} \"]\"\n");
  ASSERT_TRUE(rec);
  EXPECT_TRUE(matches(rec, "[[a]]"));
  EXPECT_FALSE(matches(rec, "[[a]"));
  EXPECT_NE(error_of("start: t{\"a\"}\nt{x, y}: x y\n").find("takes 2 arguments, not 1"),
            std::string::npos);
  EXPECT_NE(error_of("start: t\nt{x}: x\n").find("template 't' used without arguments"),
            std::string::npos);
  EXPECT_NE(error_of("start: u{\"a\"}\n").find("'u' is not a template"), std::string::npos);
}

TEST(grammar_lark, RefusalsNameTheConstruct) {
  EXPECT_NE(error_of("start: \"a\"i\n").find("case-insensitive"), std::string::npos);
  EXPECT_NE(error_of("start: /a/i\n").find("regex flags (/.../i)"), std::string::npos);
  EXPECT_NE(error_of("start: \"a\"\n%declare X\n").find("'%declare' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("start: \"a\"\n%import other.X\n").find("only %import common.NAME"),
            std::string::npos);
  EXPECT_NE(error_of("start: INT\n").find("'INT' is not defined (add %import common.INT)"),
            std::string::npos);
  EXPECT_NE(error_of("start: A\nA: b\nb: \"x\"\n").find("terminal refers to rule 'b'"),
            std::string::npos);
  EXPECT_NE(error_of("x: \"a\"\n").find("no 'start' rule"), std::string::npos);
  EXPECT_NE(error_of("start: \"a\n").find("line 1: unterminated string"), std::string::npos);
  EXPECT_NE(error_of("start: /(/\n").find("regex /(/"), std::string::npos);
  EXPECT_NE(error_of("start: " + std::string(100, '(') + "\"a\"" + std::string(100, ')') + "\n")
                .find("nested deeper than 64"),
            std::string::npos);
  // A rule priority and ?/! modifiers do not change the language; nor does a terminal
  // priority (it steers Lark's lexer, which this scannerless reading does not model).
  EXPECT_TRUE(parse_lark("!start.2: \"a\"\n").has_value());
  auto prio = compile("start: A B\nA.2: /[a-z]+/\nB.-1: \"x\" | \"y\"\n");
  ASSERT_TRUE(prio);
  EXPECT_TRUE(testing::matches(prio, "abcx"));
  EXPECT_FALSE(testing::matches(prio, "x"));
  EXPECT_TRUE(looks_like_lark("start: \"a\""));
  EXPECT_FALSE(looks_like_lark("root ::= \"a\""));
}

// %override replaces a definition (of this grammar or an imported common one); %extend adds
// alternatives; both refuse a name nothing defines.
TEST(grammar_lark, OverrideAndExtend) {
  auto cg = compile(R"lark(start: item ("," item)*
item: WORD | NUMBER
WORD: /[a-z]+/
%import common.NUMBER
%override WORD: "x" | "y"
%extend item: "(" item ")"
%extend WORD: "zz"
%override NUMBER: "0" | "1"
)lark");
  ASSERT_TRUE(cg);
  using testing::matches;
  EXPECT_TRUE(matches(cg, "x,(y),((zz)),1"));
  EXPECT_FALSE(matches(cg, "abc"));  // WORD's old body is gone
  EXPECT_FALSE(matches(cg, "2"));    // so is common NUMBER's
  EXPECT_FALSE(matches(cg, "(x"));
  EXPECT_NE(
      error_of("start: \"a\"\n%override b: \"x\"\n").find("%override of 'b', which is not defined"),
      std::string::npos);
  EXPECT_NE(
      error_of("start: \"a\"\n%extend b: \"x\"\n").find("%extend of 'b', which is not defined"),
      std::string::npos);
  EXPECT_NE(error_of("start: \"a\"\n%extend\n").find("needs a definition"), std::string::npos);
  EXPECT_NE(error_of("start: \"a\"\n%declare X\n").find("post-lexer"), std::string::npos);
}

// Templates too: %override replaces a template (its parameters may change), %extend adds
// alternatives to every instance (the same parameters, as Lark requires).
TEST(grammar_lark, OverrideAndExtendTemplates) {
  auto cg = compile(R"lark(start: pair{"a", "b"} ";" list{NUM}
pair{x, y}: x "=" y
list{e}: e ("," e)*
NUM: /[0-9]+/
%override pair{k, v}: k ":" v
%extend list{e}: "[" e "]" | "-"
)lark");
  ASSERT_TRUE(cg);
  using testing::matches;
  EXPECT_TRUE(matches(cg, "a:b;1,22"));
  EXPECT_TRUE(matches(cg, "a:b;[7]"));
  EXPECT_TRUE(matches(cg, "a:b;-"));
  EXPECT_FALSE(matches(cg, "a=b;1"));  // pair's old body is gone
  EXPECT_FALSE(matches(cg, "a:b;[x]"));
  EXPECT_FALSE(matches(cg, "a:b;[1,2]"));
  // An extension reaches instances made inside other templates and recursive ones.
  auto nested = compile(R"lark(start: wrap{"x"}
wrap{v}: "(" opt{v} ")"
opt{v}: v
%extend opt{v}: v v | wrap{v}
)lark");
  ASSERT_TRUE(nested);
  EXPECT_TRUE(matches(nested, "(x)"));
  EXPECT_TRUE(matches(nested, "(xx)"));
  EXPECT_TRUE(matches(nested, "((xx))"));
  EXPECT_FALSE(matches(nested, "(xxx)"));
  EXPECT_NE(error_of("start: t{\"a\"}\nt{x}: x\n%extend t{y}: y y\n")
                .find("%extend of template 't' with different parameters"),
            std::string::npos);
  EXPECT_NE(error_of("start: \"a\"\n%extend t{x}: x\n")
                .find("%extend of template 't', which is not a defined template"),
            std::string::npos);
  EXPECT_NE(error_of("start: r\nr: \"a\"\n%override r{x}: x\n")
                .find("%override of template 'r', which is not a defined template"),
            std::string::npos);
  EXPECT_NE(error_of("start: t{\"a\"}\nt{x}: x\n%override t: \"b\"\n")
                .find("%override of 't', which is not defined as a rule (it is a template)"),
            std::string::npos);
}

}  // namespace
}  // namespace di::grammar
