// SPDX-License-Identifier: Apache-2.0
// Structural-tag leaf formats added in grammar8 (structural_tag/leaf_formats.h): regex, grammar
// (EBNF), token / exclude_token / any_tokens, token begin/end of a tag, optional / plus / star /
// repeat; grammar9's dispatch, token_dispatch, token_triggered_tags, qwen_xml_parameter and
// several excluded tokens; masks against one-by-one token acceptance; errors naming the field.
#include <gtest/gtest.h>

#include "grammar/structural_tag/structural_tag.h"
#include "test_vocab.h"

namespace di::grammar {
namespace {

using testing::matches;
using testing::small_vocab;

std::shared_ptr<const TokenTrie> trie() {
  static const auto t = TokenTrie::build(small_vocab());
  return t;
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& json) {
  auto g = structural_tag_to_grammar(json, {}, trie().get());
  EXPECT_TRUE(g.has_value()) << g.status().message();
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, trie());
  EXPECT_TRUE(cg.has_value());
  return cg ? *cg : nullptr;
}

std::string error_of(const std::string& json, bool with_vocab = true) {
  auto g = structural_tag_to_grammar(json, {}, with_vocab ? trie().get() : nullptr);
  return g ? "" : g.status().message();
}

int32_t id_of(const std::string& text) {
  return trie()->find_token(text);
}

// Feeds `tokens`; before each one (and at the end) the mask must equal accept_token's verdict
// on every token of the vocabulary (EOS: the text is complete). False if a token is refused.
bool walk_checking_masks(const std::shared_ptr<const CompiledGrammar>& cg,
                         const std::vector<int32_t>& tokens) {
  GrammarMatcher m(cg);
  TokenBitmask mask;
  for (size_t step = 0; step <= tokens.size(); ++step) {
    m.fill_next_token_bitmask(mask);
    for (int32_t t = 1; t < static_cast<int32_t>(trie()->vocab_size()); ++t) {
      const bool ok = m.accept_token(t);
      if (ok) m.rollback(1);
      EXPECT_EQ(mask.test(t), ok) << "step " << step << " token " << t;
    }
    EXPECT_EQ(mask.test(0), m.can_terminate()) << "step " << step;
    if (step < tokens.size() && !m.accept_token(tokens[step])) return false;
  }
  return m.can_terminate();
}

TEST(grammar_structural_tag_formats, RegexAndGrammar) {
  auto cg = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<r>", "content": {"type": "regex", "pattern": "[0-9]{2,3}"},
       "end": "</r>"},
      {"type": "grammar", "grammar": "root ::= \"a\" root | \"b\""}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r>12</r>b"));
  EXPECT_TRUE(matches(cg, "<r>123</r>aab"));
  EXPECT_FALSE(matches(cg, "<r>1</r>b"));
  EXPECT_FALSE(matches(cg, "<r>12</r>a"));
  EXPECT_FALSE(matches(cg, "<r>1a</r>b"));
  // The regex is a whole match (no search): ^/$ are allowed but add nothing.
  auto anchored = compile(R"({"format": {"type": "regex", "pattern": "^ab+$"}})");
  ASSERT_TRUE(anchored);
  EXPECT_TRUE(matches(anchored, "abb"));
  EXPECT_FALSE(matches(anchored, "xabb"));
}

TEST(grammar_structural_tag_formats, TokenFormats) {
  const int32_t ab = id_of("ab"), abc = id_of("abc"), x = 'x', y = 'y', a = 'a', b = 'b';
  ASSERT_GT(ab, 255);
  // A tag opened by the token "ab", closed by the token "abc", free tokens but "ab" between.
  auto cg = compile(R"({"format": {"type": "tag", "begin": {"type": "token", "token": "ab"},
      "content": {"type": "any_tokens", "exclude_tokens": ["ab"]},
      "end": {"type": "token", "token": )" +
                    std::to_string(abc) + "}}}");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(walk_checking_masks(cg, {ab, x, y, abc}));
  EXPECT_TRUE(walk_checking_masks(cg, {ab, abc}));
  EXPECT_FALSE(walk_checking_masks(cg, {a, b}));  // the bytes of "ab" are not the token
  EXPECT_FALSE(walk_checking_masks(cg, {ab, ab}));
  EXPECT_FALSE(walk_checking_masks(cg, {ab, x}));  // not closed
  auto one = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "exclude_token", "exclude_tokens": [120]}, {"type": "const_string", "value": "!"},
      {"type": "optional", "content": {"type": "token", "token": 121}},
      {"type": "repeat", "min": 1, "max": 2, "content": {"type": "const_string", "value": "z"}}]}})");
  ASSERT_TRUE(one);
  EXPECT_TRUE(walk_checking_masks(one, {y, '!', 'z'}));
  EXPECT_TRUE(walk_checking_masks(one, {ab, '!', y, 'z', 'z'}));
  EXPECT_FALSE(walk_checking_masks(one, {x, '!', 'z'}));
  EXPECT_FALSE(walk_checking_masks(one, {y, '!', 'z', 'z', 'z'}));
  auto plus =
      compile(R"({"format": {"type": "plus", "content": {"type": "token", "token": "ab"}}})");
  ASSERT_TRUE(plus);
  EXPECT_TRUE(walk_checking_masks(plus, {ab, ab}));
  EXPECT_FALSE(walk_checking_masks(plus, {}));
}

TEST(grammar_structural_tag_formats, ErrorsNameTheField) {
  EXPECT_NE(error_of(R"({"format": {"type": "regex", "pattern": "(a"}})").find("format.pattern:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "grammar", "grammar": "root ::= x"}})")
                .find("format.grammar:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token", "token": "nope"}})")
                .find("format.token: no token has the text 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token", "token": 100000}})")
                .find("format.token: token id 100000 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"format": {"type": "token", "token": 120}})", false).find("need a vocabulary"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "dispatch", "rules": [["<a", {"type": "any_text"}]]}})")
                .find("format.rules[0][1]: must not be unlimited"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "dispatch", "rules": [["", {"type": "const_string",
      "value": "1"}]]}})")
                .find("format.rules[0][0]: must be a non-empty string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token_dispatch", "rules": [["ab", {"type":
      "const_string", "value": "1"}], [256, {"type": "const_string", "value": "2"}]]}})")
                .find("format.rules[1][0]: is repeated"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token_dispatch", "rules": [["ab"]]}})")
                .find("format.rules[0]: must be a [token, format] pair"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token_triggered_tags", "trigger_tokens": ["ab"],
      "tags": [{"begin": "<a>", "end": "</a>", "content": {"type": "const_string", "value": "1"}}]}})")
                .find("format.tags[0].begin: must be a token format"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "token_triggered_tags", "trigger_tokens": ["ab", "ba"],
      "tags": [{"begin": {"type": "token", "token": "ab"}, "end": "</a>",
                "content": {"type": "const_string", "value": "1"}}]}})")
                .find("format.trigger_tokens[1]: begins no tag"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "qwen_xml_parameter", "json_schema": {"type": "object",
      "properties": {"a": {}}, "patternProperties": {"x": {}}}}})")
                .find("qwen_xml_parameter: keyword 'patternProperties'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "json_schema", "json_schema": {}, "style": "yaml"}})")
                .find("format.style: 'yaml' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "exclude_token", "exclude_tokens": "ab"}})")
                .find("format.exclude_tokens: must be an array of tokens"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"format": {"type": "nope"}})").find("format.type: 'nope' is not supported"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [
      {"begin": {"type": "token", "token": "ab"}, "end": "</a>",
       "content": {"type": "const_string", "value": "1"}}]}})")
                .find("format.tags[0].begin: must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"},
      "end": {"type": "token", "token": "ab"}}})")
                .find("format.end: a token end after unlimited content is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "star", "content": {"type": "any_text"}}})")
                .find("format.content: must not be unlimited in 'star'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "repeat", "min": 3, "max": 2,
      "content": {"type": "const_string", "value": "a"}}})")
                .find("format.max:"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": {"type": "regex", "pattern": "a", "excludes": ["b"]}})")
                .find("format.excludes: is not supported on a regex format"),
            std::string::npos);
}

// exclude_token / any_tokens with several excluded tokens, or none.
TEST(grammar_structural_tag_formats, SeveralExcludedTokens) {
  const int32_t ab = id_of("ab"), abc = id_of("abc"), x = 'x', y = 'y';
  auto cg = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "any_tokens", "exclude_tokens": ["ab", "abc", 120]},
      {"type": "token", "token": "abc"}]}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(walk_checking_masks(cg, {y, 'z', abc}));
  EXPECT_FALSE(walk_checking_masks(cg, {y, ab, abc}));
  EXPECT_FALSE(walk_checking_masks(cg, {x, abc}));
  // 'x' stays allowed where another reading takes it (the const "x" after the any_tokens).
  auto other = compile(R"({"format": {"type": "sequence", "elements": [
      {"type": "exclude_token", "exclude_tokens": [120, 121]}, {"type": "optional", "content":
      {"type": "const_string", "value": "x"}}]}})");
  ASSERT_TRUE(other);
  EXPECT_TRUE(walk_checking_masks(other, {'z', x}));
  EXPECT_FALSE(walk_checking_masks(other, {y}));
  auto none = compile(R"({"format": {"type": "exclude_token", "exclude_tokens": []}})");
  ASSERT_TRUE(none);
  EXPECT_TRUE(walk_checking_masks(none, {x}));
  EXPECT_TRUE(walk_checking_masks(none, {ab}));
  EXPECT_FALSE(walk_checking_masks(none, {x, y}));
}

// dispatch: free text; a pattern is followed by its format; loop or once; excludes.
TEST(grammar_structural_tag_formats, Dispatch) {
  auto cg = compile(R"({"format": {"type": "tag", "begin": "<r>", "end": "</r>", "content": {
      "type": "dispatch", "rules": [["<f=a>", {"type": "const_string", "value": "1;"}],
                                    ["<f=b>", {"type": "regex", "pattern": "[0-9]+;"}]],
      "excludes": ["bad"]}}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, "<r></r>"));
  EXPECT_TRUE(matches(cg, "<r>hi <f=a>1; and <f=b>42; bye</r>"));
  EXPECT_FALSE(matches(cg, "<r>hi <f=a>2;</r>"));
  EXPECT_FALSE(matches(cg, "<r>a bad word</r>"));
  auto once = compile(R"({"format": {"type": "dispatch", "loop": false,
      "rules": [["<f>", {"type": "const_string", "value": "X"}]]}})");
  ASSERT_TRUE(once);
  EXPECT_TRUE(matches(once, "text <f>X"));
  EXPECT_TRUE(matches(once, "only text"));
  EXPECT_FALSE(matches(once, "<f>X more"));
}

// token_dispatch and token_triggered_tags: trigger tokens among free tokens, masks exact.
TEST(grammar_structural_tag_formats, TokenDispatchAndTokenTriggeredTags) {
  const int32_t ab = id_of("ab"), abc = id_of("abc"), ba = id_of("ba"), x = 'x', y = 'y';
  auto d = compile(R"({"format": {"type": "token_dispatch", "exclude_tokens": [121],
      "rules": [["ab", {"type": "const_string", "value": "1"}],
                ["ba", {"type": "token", "token": "abc"}]]}})");
  ASSERT_TRUE(d);
  EXPECT_TRUE(walk_checking_masks(d, {x, ab, '1', x, ba, abc}));
  EXPECT_TRUE(walk_checking_masks(d, {}));
  EXPECT_FALSE(walk_checking_masks(d, {ab, '2'}));
  EXPECT_FALSE(walk_checking_masks(d, {x, y}));  // excluded
  EXPECT_FALSE(walk_checking_masks(d, {ab}));    // a trigger must be followed by its format
  auto once = compile(R"({"format": {"type": "token_dispatch", "loop": false,
      "rules": [["ab", {"type": "const_string", "value": "1"}]]}})");
  ASSERT_TRUE(once);
  EXPECT_TRUE(walk_checking_masks(once, {x, ab, '1'}));
  EXPECT_FALSE(walk_checking_masks(once, {ab, '1', x}));
  const std::string tags = R"("trigger_tokens": ["ab", "ba"], "exclude_tokens": [121],
      "tags": [{"begin": {"type": "token", "token": "ab"}, "end": {"type": "token", "token":
                "abc"}, "content": {"type": "const_string", "value": "1"}},
               {"begin": {"type": "token", "token": "ba"}, "end": "!",
                "content": {"type": "any_tokens", "exclude_tokens": ["!"]}}])";
  auto t = compile(R"({"format": {"type": "token_triggered_tags", )" + tags + "}}");
  ASSERT_TRUE(t);
  EXPECT_TRUE(walk_checking_masks(t, {x, ab, '1', abc, x, ba, x, '!'}));
  EXPECT_TRUE(walk_checking_masks(t, {x}));
  EXPECT_FALSE(walk_checking_masks(t, {ab, '1'}));  // not closed
  EXPECT_FALSE(walk_checking_masks(t, {y}));
  auto first = compile(R"({"format": {"type": "token_triggered_tags", "at_least_one": true,
      "stop_after_first": true, )" +
                       tags + "}}");
  ASSERT_TRUE(first);
  EXPECT_TRUE(walk_checking_masks(first, {x, ab, '1', abc}));
  EXPECT_FALSE(walk_checking_masks(first, {x}));
  EXPECT_FALSE(walk_checking_masks(first, {ab, '1', abc, x}));
  auto some = compile(R"({"format": {"type": "token_triggered_tags", "at_least_one": true, )" +
                      tags + "}}");
  ASSERT_TRUE(some);
  EXPECT_TRUE(walk_checking_masks(some, {ab, '1', abc, x, ba, '!', x}));
  EXPECT_FALSE(walk_checking_masks(some, {x, x}));
}

// qwen_xml_parameter (and json_schema with style qwen_xml): <parameter=KEY>VALUE</parameter>.
TEST(grammar_structural_tag_formats, QwenXmlParameter) {
  const std::string schema = R"({"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}, "opts": {"type": "object", "properties": {"a": {}}}},
      "required": ["city", "days"]})";
  for (const std::string& f :
       {R"({"type": "qwen_xml_parameter", "json_schema": )" + schema + "}",
        R"({"type": "json_schema", "style": "qwen_xml", "json_schema": )" + schema + "}"}) {
    auto cg = compile(R"({"format": {"type": "tag", "begin": "<function=w>", "end": "</function>",
        "content": )" +
                      f + "}}");
    ASSERT_TRUE(cg);
    EXPECT_TRUE(matches(cg,
                        "<function=w><parameter=city>Paris</parameter>"
                        "<parameter=days>3</parameter></function>"));
    EXPECT_TRUE(matches(cg,
                        "<function=w>\n<parameter=days>\n3\n</parameter>\n"
                        "<parameter=opts>{\"a\": [1]}</parameter>\n"
                        "<parameter=city>\nNew \"York\"\n</parameter>\n</function>"));
    EXPECT_FALSE(matches(cg, "<function=w><parameter=city>Paris</parameter></function>"));
    EXPECT_FALSE(matches(cg,
                         "<function=w><parameter=city>a</parameter><parameter=days>x"
                         "</parameter></function>"));
    EXPECT_FALSE(matches(cg,
                         "<function=w><parameter=city>a</parameter><parameter=days>1"
                         "</parameter><parameter=days>2</parameter></function>"));
    // Raw text runs to the first closing tag (as xgrammar, whose tests write HTML there).
    EXPECT_TRUE(matches(cg,
                        "<function=w><parameter=city>a<b></b></parameter><parameter=days>1"
                        "</parameter></function>"));
    EXPECT_FALSE(matches(cg,
                         "<function=w><parameter=city>a</parameter>b</parameter><parameter=days>"
                         "1</parameter></function>"));
  }
}

}  // namespace
}  // namespace di::grammar
