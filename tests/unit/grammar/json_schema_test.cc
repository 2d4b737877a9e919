// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "grammar/json_schema/int_range.h"
#include "grammar/json_schema/schema_converter.h"
#include "grammar/regex/regex_parser.h"
#include "schema_helper.h"
#include "test_vocab.h"

namespace di::grammar {
namespace {

using testing::Schema;

TEST(grammar_json_schema, ObjectsPropertyOrderRequiredAdditional) {
  Schema s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
               "required":["b"],"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"({"a": 1, "b": "x"})"));
  EXPECT_TRUE(s.accepts(R"({"b":"x"})"));
  EXPECT_TRUE(s.accepts("{\n  \"a\": -3,\n  \"b\": \"\"\n}"));
  EXPECT_FALSE(s.accepts(R"({"a": 1})"));
  EXPECT_FALSE(s.accepts(R"({"b": "x", "c": 1})"));
  EXPECT_FALSE(s.accepts(R"({"a": 1.5, "b": "x"})"));
}

TEST(grammar_json_schema, AdditionalKeysNeverShadowDeclaredOnes) {
  Schema s(R"({"type":"object","properties":{"ab":{"type":"integer"}}})");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s.accepts(R"({"ab": 1, "a": "x", "abc": null})"));
  EXPECT_FALSE(s.accepts(R"({"ab": 1, "ab": "x"})"));
  EXPECT_FALSE(s.accepts(R"({"ab": "x"})"));
}

TEST(grammar_json_schema, ArraysTuplesAndCounts) {
  Schema s(R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"null"},
               "minItems":2,"maxItems":3})");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s.accepts("[true, null]"));
  EXPECT_TRUE(s.accepts("[false,null,null]"));
  EXPECT_FALSE(s.accepts("[true]"));
  EXPECT_FALSE(s.accepts("[true, null, null, null]"));
  EXPECT_FALSE(s.accepts("[null, null]"));
}

TEST(grammar_json_schema, StringsNumbersEnumsRefs) {
  Schema s(R"({"$defs":{"n":{"type":"integer","minimum":-5,"exclusiveMaximum":120}},
    "type":"object","properties":{
      "n":{"$ref":"#/$defs/n"},
      "e":{"enum":["x\"y", 2, null]},
      "s":{"type":"string","minLength":2,"maxLength":3},
      "p":{"type":"string","pattern":"^[a-c]+$"},
      "d":{"type":"string","format":"date"},
      "f":{"type":"number","minimum":1.0,"maximum":3}},
    "required":["n","e","s","p","d","f"],"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto doc = [](const std::string& n, const std::string& s, const std::string& f) {
    return R"({"n": )" + n + R"(, "e": "x\"y", "s": )" + s +
           R"(, "p": "abc", "d": "2024-02-29", "f": )" + f + "}";
  };
  EXPECT_TRUE(s.accepts(doc("-5", "\"ab\"", "1")));
  EXPECT_TRUE(s.accepts(doc("119", "\"\xC3\xA9x\"", "2.75")));
  EXPECT_TRUE(s.accepts(doc("0", "\"abc\"", "3.0")));
  EXPECT_FALSE(s.accepts(doc("120", "\"ab\"", "1")));
  EXPECT_FALSE(s.accepts(doc("-6", "\"ab\"", "1")));
  EXPECT_FALSE(s.accepts(doc("1", "\"a\"", "1")));
  EXPECT_FALSE(s.accepts(doc("1", "\"abcd\"", "1")));
  EXPECT_FALSE(s.accepts(doc("1", "\"ab\"", "3.5")));
  EXPECT_FALSE(s.accepts(doc("1", "\"ab\"", "0.5")));
}

TEST(grammar_json_schema, RecursiveRefAndAnyOf) {
  Schema s(R"({"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]},
    "kids":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"({"v": 1, "kids": [{"v": "a"}, {"kids": []}]})"));
  EXPECT_FALSE(s.accepts(R"({"v": 1, "kids": [{"v": true}]})"));
}

TEST(grammar_json_schema, OneOfAllOf) {
  Schema ok(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})");
  EXPECT_TRUE(ok.ok());
  Schema overlap(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})");
  EXPECT_EQ(overlap.status().code(), StatusCode::kUnimplemented);
  Schema all(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                          {"properties":{"b":{"type":"boolean"}}}]})");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(all.accepts(R"({"a": 1, "b": true})"));
  EXPECT_FALSE(all.accepts(R"({"b": true})"));
}

TEST(grammar_json_schema, NegationsWithAPositiveForm) {
  Schema not_null(R"({"not":{"type":"null","description":"x"}})");
  ASSERT_TRUE(not_null.ok()) << not_null.status().message();
  EXPECT_TRUE(not_null.accepts("1"));
  EXPECT_TRUE(not_null.accepts(R"("a")"));
  EXPECT_FALSE(not_null.accepts("null"));
  Schema narrowed(R"({"type":["string","null"],"not":{"type":["null"]}})");
  ASSERT_TRUE(narrowed.ok());
  EXPECT_TRUE(narrowed.accepts(R"("a")"));
  EXPECT_FALSE(narrowed.accepts("null"));
  EXPECT_FALSE(narrowed.accepts("1"));
  Schema twice(R"({"not":{"not":{"type":"integer","minimum":2}}})");
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_TRUE(twice.accepts("3"));
  EXPECT_FALSE(twice.accepts("1"));
  EXPECT_FALSE(twice.accepts(R"("a")"));
  Schema nothing(R"({"type":"integer","not":{}})");
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing.accepts("1"));
  EXPECT_TRUE(Schema(R"({"not":false})").accepts("[]"));
  Schema no_b(R"({"properties":{"a":{"type":"integer"}},"not":{"required":["b"]}})");
  ASSERT_TRUE(no_b.ok()) << no_b.status().message();
  EXPECT_TRUE(no_b.accepts(R"({"a": 1})"));
  EXPECT_TRUE(no_b.accepts(R"({"c": 1})"));
  EXPECT_FALSE(no_b.accepts(R"({"b": 1})"));
  EXPECT_FALSE(no_b.accepts(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(no_b.accepts("1"));
  // "A number that is not an integer" has no grammar here: refused, naming the keyword.
  Schema frac(R"({"not":{"type":"integer"}})");
  ASSERT_FALSE(frac.ok());
  EXPECT_NE(frac.status().message().find("not"), std::string::npos);
}

TEST(grammar_json_schema, StrictErrorsNameTheKeyword) {
  // (unevaluatedProperties alone is additionalProperties now: json_schema_keywords_test.cc.)
  for (const char* kw : {"not", "dependentRequired", "dependentSchemas"}) {
    std::string schema = std::string(R"({"type":"object",")") + kw + R"(":{"enum":[1]}})";
    Schema s(schema);
    ASSERT_FALSE(s.ok()) << kw;
    EXPECT_NE(s.status().message().find(kw), std::string::npos) << s.status().message();
    JsonSchemaOptions lenient;
    lenient.lenient = true;
    EXPECT_TRUE(Schema(schema, lenient).ok()) << kw;
  }
  EXPECT_FALSE(Schema(R"({"$ref":"http://x/y.json"})").ok());
  EXPECT_FALSE(Schema(R"({"type":"string","format":"ipv6"})").ok());
  EXPECT_EQ(Schema("{not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Schema(R"({"type":"object","properties":{"a":{"$ref":"#/nope"}}})").ok());
}

bool int_in_range(const std::string& re, int64_t v) {
  auto g = regex_to_grammar(re);
  if (!g) return false;
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(testing::small_vocab()));
  return testing::matches(*cg, std::to_string(v));
}

TEST(grammar_int_range, MatchesExactlyTheRange) {
  struct Case {
    std::optional<int64_t> lo, hi;
  };
  for (Case c : {Case{0, 9}, Case{-13, 107}, Case{5, std::nullopt}, Case{std::nullopt, -20},
                 Case{99, 1000}, Case{-1000, -99}}) {
    std::string re = int_range_regex(c.lo, c.hi);
    for (int64_t v = -1200; v <= 1200; v += 1) {
      bool expect = (!c.lo || v >= *c.lo) && (!c.hi || v <= *c.hi);
      ASSERT_EQ(int_in_range(re, v), expect) << re << " value " << v;
    }
  }
}

}  // namespace
}  // namespace di::grammar

namespace di::grammar {
namespace {

TEST(grammar_json_schema, PatternProperties) {
  Schema s(R"({"type":"object","properties":{"id":{"type":"integer"}},
               "patternProperties":{"^x-[a-z]+$":{"type":"boolean"}},"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"({"id": 1, "x-ab": true, "x-c": false})"));
  EXPECT_FALSE(s.accepts(R"({"id": 1, "x-ab": 3})"));
  EXPECT_FALSE(s.accepts(R"({"id": 1, "y": true})"));
  Schema clash(R"({"properties":{"x-a":{"type":"integer"}},"patternProperties":{"^x-":{}}})");
  EXPECT_EQ(clash.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace di::grammar

namespace di::grammar {
namespace {

TEST(grammar_json_schema, OneOfObjectDiscriminators) {
  Schema tagged(R"({"oneOf":[
    {"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
    {"type":"object","properties":{"kind":{"enum":["b","c"]}},"required":["kind"]}]})");
  ASSERT_TRUE(tagged.ok()) << tagged.status().message();
  EXPECT_TRUE(tagged.accepts(R"({"kind": "a", "x": 1})"));
  EXPECT_TRUE(tagged.accepts(R"({"kind": "c"})"));
  EXPECT_FALSE(tagged.accepts(R"({"kind": "d"})"));
  Schema closed(R"({"oneOf":[
    {"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},
    {"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]})");
  EXPECT_TRUE(closed.ok()) << closed.status().message();
  // grammar8: branches that may overlap but have positive negations: exactly one holds.
  Schema open(R"({"oneOf":[
    {"type":"object","required":["a"]},{"type":"object","required":["b"]}]})");
  ASSERT_TRUE(open.ok()) << open.status().message();
  EXPECT_TRUE(open.accepts(R"({"a": 1})"));
  EXPECT_TRUE(open.accepts(R"({"b": 1, "c": 2})"));
  EXPECT_FALSE(open.accepts(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(open.accepts("{}"));
  EXPECT_FALSE(open.accepts("1"));
  Schema types(R"({"oneOf":[{"type":["string","null"]},{"type":["null","boolean"]}]})");
  ASSERT_TRUE(types.ok()) << types.status().message();
  EXPECT_TRUE(types.accepts("\"s\""));
  EXPECT_TRUE(types.accepts("true"));
  EXPECT_FALSE(types.accepts("null"));  // both branches hold
  EXPECT_FALSE(types.accepts("1"));
  // "A number but not an integer" has no positive form: refused.
  EXPECT_FALSE(Schema(R"({"oneOf":[{"type":["integer","string"]},{"type":"number"}]})").ok());
  // A branch without a positive negation (a pattern): still refused.
  EXPECT_FALSE(Schema(R"({"oneOf":[{"type":"string","pattern":"^a"},{"type":"string"}]})").ok());
}

}  // namespace
}  // namespace di::grammar
