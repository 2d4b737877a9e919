// SPDX-License-Identifier: Apache-2.0
// Structural tags' json_schema styles kimi_k3_xml (json_schema/xml_parameters.cc) and cohere_xml
// (json_schema/xml_cohere.cc): what they accept and refuse, and a 400 naming the field where a
// schema cannot be written.
#include <gtest/gtest.h>

#include "mask_walk.h"
#include "structural_tag_helper.h"

namespace di::grammar {
namespace {

using testing::matches;
using testing::styled;

std::string error_of(const std::string& style, const std::string& schema) {
  return testing::tag_error(testing::styled_tag(style, schema));
}

const char* kWeather = R"({"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
    "any": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
    "required": ["city", "days"], "additionalProperties": false})";

std::string kimi(const std::string& key, const std::string& type, const std::string& value) {
  return "<|open|>argument key=\"" + key + "\" type=\"" + type + "\"<|sep|>" + value +
         "<|close|>argument<|sep|>";
}

TEST(grammar_structural_tag_kimi_cohere, KimiK3Xml) {
  auto cg = styled("kimi_k3_xml", kWeather);
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, kimi("city", "string", "Paris <b>") + kimi("days", "number", " 3\n")));
  EXPECT_TRUE(matches(cg, kimi("days", "number", "3") + "\n" + kimi("unit", "string", "f") +
                              kimi("city", "string", "") + kimi("any", "null", "7")));
  // A declared type is pinned (integers are "number", as Kimi-K3 renders them); a combinator's
  // is any type name.
  EXPECT_FALSE(matches(cg, kimi("city", "string", "a") + kimi("days", "integer", "3")));
  EXPECT_FALSE(matches(cg, kimi("city", "number", "a") + kimi("days", "number", "3")));
  EXPECT_TRUE(matches(cg, kimi("city", "string", "a") + kimi("days", "number", "3") +
                              kimi("any", "integer", "null")));
  // Values: a string enum raw, an integer JSON, a raw string ends at the first closing tag.
  EXPECT_FALSE(matches(cg, kimi("city", "string", "a") + kimi("days", "number", "3") +
                               kimi("unit", "string", "\"c\"")));
  EXPECT_FALSE(matches(cg, kimi("city", "string", "a") + kimi("days", "number", "x")));
  EXPECT_FALSE(matches(
      cg, kimi("city", "string", "a<|close|>argument<|sep|>b") + kimi("days", "number", "3")));
  EXPECT_FALSE(matches(cg, kimi("city", "string", "a")));  // days required
  EXPECT_FALSE(matches(cg, kimi("city", "string", "a") + kimi("days", "number", "3") +
                               kimi("other", "string", "x")));  // additionalProperties false
  // Keys are attribute values: & and " are escaped as the renderer writes them.
  auto esc = styled("kimi_k3_xml", R"({"type": "object", "properties": {"a\"&b": {"type":
      "boolean"}}, "required": ["a\"&b"]})");
  ASSERT_TRUE(esc);
  EXPECT_TRUE(matches(esc, kimi("a&quot;&amp;b", "boolean", "true")));
  EXPECT_FALSE(matches(esc, kimi("a\"&b", "boolean", "true")));
}

std::string cofl(const std::string& name, const std::string& type, const std::string& value) {
  std::string out = "<cofl:value";
  if (!name.empty()) out.append(" name=\"").append(name).append("\"");
  out.append(" type=\"").append(type).append("\">").append(value).append("</cofl:value>");
  return out;
}

// `ws` then `s` (GCC 12's -Wrestrict misfires on a literal + std::string here).
std::string lead(const char* ws, const std::string& s) {
  std::string out = ws;
  out += s;
  return out;
}

TEST(grammar_structural_tag_kimi_cohere, CohereXmlScalars) {
  auto cg = styled("cohere_xml", kWeather);
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, cofl("city", "raw", "echo \"Hi\" <b>") + cofl("days", "json", "3")));
  EXPECT_TRUE(matches(cg, lead("\n", cofl("days", "json", " 3\n")) + "\n" +
                              cofl("unit", "raw", "c") + cofl("city", "raw", "") +
                              cofl("any", "json", "null")));
  // Each value goes with its type: a string is raw, an integer JSON, an anyOf branch its own.
  EXPECT_FALSE(matches(cg, cofl("city", "json", "\"a\"") + cofl("days", "json", "3")));
  EXPECT_FALSE(matches(cg, cofl("city", "raw", "a") + cofl("days", "raw", "3")));
  EXPECT_FALSE(
      matches(cg, cofl("city", "raw", "a") + cofl("days", "json", "3") + cofl("any", "raw", "3")));
  EXPECT_FALSE(matches(cg, cofl("city", "raw", "a") + cofl("days", "json", "3") +
                               cofl("unit", "raw", " c")));  // a raw enum value is exact
  EXPECT_FALSE(matches(cg, cofl("city", "raw", "a")));       // days required
  EXPECT_FALSE(matches(cg, cofl("city", "raw", "a") + cofl("days", "json", "3") +
                               cofl("days", "json", "4")));  // once each
  EXPECT_FALSE(matches(cg, "<parameter=city>a</parameter><parameter=days>1</parameter>"));
}

TEST(grammar_structural_tag_kimi_cohere, CohereXmlNestsDictsAndLists) {
  auto cg = styled("cohere_xml", R"({"type": "object", "properties": {
      "filters": {"type": "object", "properties": {"fresh": {"type": "boolean"},
          "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
          "required": ["fresh"], "additionalProperties": false},
      "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
          "items": false, "minItems": 1},
      "loose": {"type": "object", "patternProperties": {"^x": {"type": "integer"}},
          "additionalProperties": false}}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(
      cg,
      cofl("filters", "dict",
           lead("\n  ", cofl("fresh", "json", "true")) + "\n  " +
               cofl("tags", "list", cofl("", "raw", "music") + cofl("", "raw", "a<b")) + "\n")));
  EXPECT_TRUE(matches(cg, cofl("pair", "list", cofl("", "json", "1") + cofl("", "raw", "x"))));
  EXPECT_TRUE(matches(cg, cofl("pair", "list", cofl("", "json", "1"))));
  EXPECT_FALSE(matches(cg, cofl("pair", "list", "")));  // minItems 1
  EXPECT_FALSE(matches(cg, cofl("pair", "list",
                                cofl("", "json", "1") + cofl("", "raw", "x") +
                                    cofl("", "raw", "y"))));  // items false
  EXPECT_FALSE(matches(
      cg, cofl("filters", "dict",
               cofl("fresh", "json", "true") +
                   cofl("tags", "list",
                        cofl("", "raw", "a") + cofl("", "raw", "b") + cofl("", "raw", "c")))));
  EXPECT_FALSE(matches(cg, cofl("filters", "dict", cofl("tags", "list", ""))));  // fresh
  EXPECT_FALSE(
      matches(cg, cofl("filters", "json", "{\"fresh\": true}")));  // a plain dict is a dict
  // Keywords the nested form cannot enforce: the value is JSON text.
  EXPECT_TRUE(matches(cg, cofl("loose", "json", "{\"x1\": 1}")));
  EXPECT_FALSE(matches(cg, cofl("loose", "json", "{\"a\": 1}")));
  EXPECT_FALSE(matches(cg, cofl("loose", "dict", cofl("x1", "json", "1"))));
}

// Free values (no schema, true, additionalProperties absent) are any raw / json / dict / list,
// recursively; undeclared names are never a declared one, with entities for & < > ".
TEST(grammar_structural_tag_kimi_cohere, CohereXmlFreeValuesAndNames) {
  auto cg = styled("cohere_xml", R"({"type": "object", "properties": {"a<b": {"type":
      "integer"}, "q": {}}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, cofl("a&lt;b", "json", "1")));
  EXPECT_FALSE(matches(cg, cofl("a<b", "json", "1")));
  EXPECT_TRUE(matches(cg, cofl("q", "dict",
                               cofl("x", "list", cofl("", "raw", "s") + cofl("", "json", "2.5")) +
                                   cofl("y &amp; z", "dict", ""))));
  EXPECT_TRUE(matches(
      cg, cofl("zz", "raw", "free") + cofl("a&lt;", "json", "null") + cofl("a&lt;bc", "list", "")));
  EXPECT_FALSE(matches(cg, cofl("zz", "json", "\"s\"")));  // free json is a scalar
  // An undeclared name is never a declared one (it would take the other schema).
  EXPECT_FALSE(matches(cg, cofl("a&lt;b", "raw", "x")));
  EXPECT_FALSE(matches(cg, cofl("a&b", "raw", "x")));  // a bare & is not a name
}

// Length-bounded strings: maxLength alone is any text of that many code points up to the close
// (a bounded TagDispatch); with a minLength, characters other than '<'.
TEST(grammar_structural_tag_kimi_cohere, LengthBoundedRawStrings) {
  auto cg = styled("cohere_xml", R"({"type": "object", "properties": {"s": {"type": "string",
      "maxLength": 3}, "m": {"type": "string", "minLength": 1, "maxLength": 2}}})");
  ASSERT_TRUE(cg);
  EXPECT_TRUE(matches(cg, cofl("s", "raw", "a<b") + cofl("m", "raw", "xy")));
  EXPECT_TRUE(matches(cg, cofl("s", "raw", "")));
  EXPECT_FALSE(matches(cg, cofl("s", "raw", "abcd")));
  EXPECT_FALSE(matches(cg, cofl("m", "raw", "")));
  EXPECT_FALSE(matches(cg, cofl("m", "raw", "a<")));
  // A string with a raw form is only raw (narrower than the schema where it holds '<').
  EXPECT_FALSE(matches(cg, cofl("m", "json", "\"ab\"")));
  auto kimi_cg = styled("kimi_k3_xml", R"({"type": "object", "properties": {"s": {"type":
      "string", "maxLength": 2}}, "required": ["s"]})");
  ASSERT_TRUE(kimi_cg);
  EXPECT_TRUE(matches(kimi_cg, kimi("s", "string", "<|")));
  EXPECT_FALSE(matches(kimi_cg, kimi("s", "string", "<|c")));
}

// Masks equal one-by-one token acceptance along valid texts (multi-byte tokens straddle tags).
TEST(grammar_structural_tag_kimi_cohere, MasksAgreeWithAcceptance) {
  auto kimi_cg = styled("kimi_k3_xml", kWeather);
  ASSERT_TRUE(kimi_cg);
  EXPECT_TRUE(testing::walk_checking_masks(
      kimi_cg, *testing::small_trie(),
      kimi("days", "number", "12") + kimi("city", "string", "abc\"ab")));
  auto cohere_cg = styled("cohere_xml", R"({"type": "object", "properties": {"a": {"type":
      "array", "items": {"type": "integer"}}}, "required": ["a"]})");
  ASSERT_TRUE(cohere_cg);
  EXPECT_TRUE(testing::walk_checking_masks(
      cohere_cg, *testing::small_trie(),
      cofl("a", "list", cofl("", "json", "12") + "\n" + cofl("", "json", " 3")) +
          cofl("ba", "raw", "ab") + cofl("x", "dict", cofl("aaa", "json", "null"))));
}

// $ref is followed, recursion included (a tree of dicts); properties without a type are a dict.
TEST(grammar_structural_tag_kimi_cohere, CohereXmlRecursiveRefs) {
  auto cg = styled("cohere_xml", R"({"$defs": {"node": {"properties": {"v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"],
      "additionalProperties": false}}, "type": "object", "properties": {"root": {"$ref":
      "#/$defs/node"}}, "required": ["root"], "additionalProperties": false})");
  ASSERT_TRUE(cg);
  const std::string leaf = cofl("", "dict", cofl("v", "json", "2"));
  EXPECT_TRUE(matches(cg, cofl("root", "dict", cofl("v", "json", "1"))));
  EXPECT_TRUE(matches(
      cg, cofl("root", "dict",
               cofl("v", "json", "1") +
                   cofl("kids", "list",
                        leaf + cofl("", "dict",
                                    cofl("v", "json", "3") + cofl("kids", "list", leaf))))));
  EXPECT_FALSE(matches(cg, cofl("root", "dict", cofl("kids", "list", leaf))));  // v required
  EXPECT_FALSE(matches(
      cg,
      cofl("root", "dict", cofl("v", "json", "1") + cofl("kids", "list", cofl("", "dict", "")))));
}

TEST(grammar_structural_tag_kimi_cohere, ErrorsNameTheField) {
  EXPECT_NE(error_of("cohere_xml", R"({"type": "object", "anyOf": [{}]})")
                .find("cohere_xml: the schema must be an object"),
            std::string::npos);
  EXPECT_NE(error_of("cohere_xml", R"({"type": "object", "required": ["x"]})")
                .find("cohere_xml: required 'x' without a properties entry"),
            std::string::npos);
  EXPECT_NE(error_of("kimi_k3_xml", R"({"type": "object", "properties": {"": {}}})")
                .find("kimi_k3_xml: property name ''"),
            std::string::npos);
  const std::string long_name(2000, 'a');
  EXPECT_NE(error_of("cohere_xml", R"({"properties": {")" + long_name + R"(": {}}})")
                .find("cohere_xml: a property name longer than 1024 bytes"),
            std::string::npos);
  EXPECT_NE(error_of("qwen_xml", R"({"properties": {")" + long_name + R"(": {}}})")
                .find("qwen_xml_parameter: a property name longer than 1024 bytes"),
            std::string::npos);
  EXPECT_NE(error_of("kimi_xml", R"({"type": "object"})")
                .find("format.style: 'kimi_xml' is not supported (json, qwen_xml, minimax_xml, "
                      "deepseek_xml, glm_xml, kimi_k3_xml, cohere_xml)"),
            std::string::npos);
  EXPECT_NE(error_of("cohere_xml", R"({"type": "object", "properties": {"a": {"type": "strin"}}})")
                .find("format.json_schema"),
            std::string::npos);
}

}  // namespace
}  // namespace di::grammar
