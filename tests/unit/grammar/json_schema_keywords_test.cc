// SPDX-License-Identifier: Apache-2.0
// JSON Schema applicators that need more than one grammar piece: contains/minContains,
// propertyNames, uniqueItems over finite items, if/then/else (via the negated condition) and
// allOf of object shapes with additionalProperties. Each grammar must be exact where it
// compiles; forms it cannot enforce are strict errors naming the keyword, ignored when lenient.
#include <gtest/gtest.h>

#include "schema_helper.h"

namespace di::grammar {
namespace {

using testing::lenient;
using testing::Schema;

TEST(grammar_json_schema_keywords, Contains) {
  Schema s(R"({"type":"array","items":{"type":"integer"},"contains":{"const":7}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts("[7]"));
  EXPECT_TRUE(s.accepts("[1, 7, 2]"));
  EXPECT_TRUE(s.accepts("[7,7]"));
  EXPECT_FALSE(s.accepts("[]"));
  EXPECT_FALSE(s.accepts("[1, 2]"));
  EXPECT_FALSE(s.accepts("[7, \"a\"]"));
  Schema two(R"({"type":"array","contains":{"type":"string"},"minContains":2,"maxItems":3})");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_TRUE(two.accepts(R"(["a", "b"])"));
  EXPECT_TRUE(two.accepts(R"([1, "a", "b"])"));
  EXPECT_FALSE(two.accepts(R"(["a", 1])"));
  EXPECT_FALSE(two.accepts(R"(["a", "b", "c", "d"])"));
  Schema min_items(R"({"contains":{"const":1},"minItems":3})");
  ASSERT_TRUE(min_items.ok()) << min_items.status().message();
  EXPECT_TRUE(min_items.accepts("[2, 1, 2]"));
  EXPECT_FALSE(min_items.accepts("[1, 2]"));
  EXPECT_TRUE(min_items.accepts("\"not an array\""));
  Schema none(R"({"contains":{"const":1},"minContains":0})");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none.accepts("[]"));
  // maxContains needs "does not match": refused unless maxItems implies it or `not contains`
  // has a positive form (json_schema_dependencies_test.cc).
  Schema max(R"({"type":"array","contains":{"const":1},"maxContains":1})");
  ASSERT_FALSE(max.ok());
  EXPECT_NE(max.status().message().find("maxContains"), std::string::npos);
  EXPECT_TRUE(Schema(R"({"type":"array","contains":{"const":1},"maxContains":1})", lenient()).ok());
  EXPECT_TRUE(Schema(R"({"contains":{"const":1},"maxContains":2,"maxItems":2})").ok());
}

TEST(grammar_json_schema_keywords, PropertyNames) {
  Schema map(R"({"type":"object","propertyNames":{"pattern":"^a+$"},
                  "additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(map.ok()) << map.status().message();
  EXPECT_TRUE(map.accepts(R"({"a": 1, "aa": 2})"));
  EXPECT_TRUE(map.accepts("{}"));
  EXPECT_FALSE(map.accepts(R"({"b": 1})"));
  EXPECT_FALSE(map.accepts(R"({"a": "x"})"));
  // Declared names the schema rejects cannot appear; extra keys from a finite set.
  Schema decl(R"({"properties":{"ab":{"type":"integer"},"b":{}},"required":["b"],
                  "propertyNames":{"enum":["ab","b","ba"]}})");
  ASSERT_TRUE(decl.ok()) << decl.status().message();
  EXPECT_TRUE(decl.accepts(R"({"ab": 1, "b": 2, "ba": 3})"));
  EXPECT_FALSE(decl.accepts(R"({"b": 2, "c": 3})"));
  Schema drop(R"({"properties":{"ab":{},"b":{}},"propertyNames":{"maxLength":1},
                  "additionalProperties":false})");
  ASSERT_TRUE(drop.ok()) << drop.status().message();
  EXPECT_TRUE(drop.accepts(R"({"b": 1})"));
  EXPECT_FALSE(drop.accepts(R"({"ab": 1})"));
  EXPECT_TRUE(Schema(R"({"required":["ab"],"propertyNames":{"maxLength":1}})").ok());
  EXPECT_FALSE(Schema(R"({"required":["ab"],"propertyNames":{"maxLength":1}})").accepts("{}"));
  // A pattern next to declared names would need an intersection: refused, named.
  Schema both(R"({"properties":{"a":{}},"propertyNames":{"pattern":"^a"}})");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("propertyNames"), std::string::npos);
  EXPECT_TRUE(
      Schema(R"({"properties":{"a":{}},"propertyNames":{"pattern":"^a"}})", lenient()).ok());
}

TEST(grammar_json_schema_keywords, UniqueItemsOverFiniteItems) {
  Schema s(R"({"type":"array","items":{"enum":["a","b",1,1.0]},"uniqueItems":true,
               "minItems":1})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"(["a", "b", 1])"));
  EXPECT_TRUE(s.accepts(R"([1, "a"])"));
  EXPECT_FALSE(s.accepts(R"(["a", "a"])"));
  EXPECT_FALSE(s.accepts(R"([1, "b", 1])"));
  EXPECT_FALSE(s.accepts("[]"));
  Schema bools(R"({"items":{"type":"boolean"},"uniqueItems":true})");
  ASSERT_TRUE(bools.ok());
  EXPECT_TRUE(bools.accepts("[true, false]"));
  EXPECT_FALSE(bools.accepts("[false, false]"));
  EXPECT_TRUE(bools.accepts("\"x\""));
  // Free items: refused in strict mode, naming the keyword; ignored when lenient.
  Schema free(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})");
  ASSERT_FALSE(free.ok());
  EXPECT_NE(free.status().message().find("uniqueItems"), std::string::npos);
  EXPECT_TRUE(
      Schema(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})", lenient()).ok());
  EXPECT_FALSE(Schema(R"({"enum":[[1,1]],"uniqueItems":true})").ok());
}

// grammar8: uniqueItems over objects and strings from a finite domain (objects of enum
// properties, enums of objects, anyOf of enums), bounded arrays over larger domains: every
// array of up to 3 values from a wider set against the definition.
TEST(grammar_json_schema_keywords, UniqueItemsOverEnumerableObjectsAndStrings) {
  // Spellings: keys in schema order (the only order the grammar writes).
  const std::vector<std::string> values = {R"({"a": 1})",
                                           R"({"a": 2})",
                                           R"({"a": 1, "b": true})",
                                           R"({"a": 2, "b": false})",
                                           R"({"b": true})",
                                           R"({"a": 3})",
                                           R"("x")"};
  const auto in_domain = [](int v) { return v <= 3; };
  Schema objects(R"({"type":"array","uniqueItems":true,"maxItems":2,"items":{"type":"object",
      "properties":{"a":{"enum":[1,2]},"b":{"type":"boolean"}},"required":["a"],
      "additionalProperties":false}})");
  ASSERT_TRUE(objects.ok()) << objects.status().message();
  std::vector<std::vector<int>> arrays{{}};
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i].size() < 3)
      for (int v = 0; v < static_cast<int>(values.size()); ++v) {
        arrays.push_back(arrays[i]);
        arrays.back().push_back(v);
      }
  for (const auto& a : arrays) {
    std::string text = "[";
    bool valid = a.size() <= 2;
    for (size_t i = 0; i < a.size(); ++i) {
      text += (i ? ", " : "") + values[a[i]];
      valid = valid && in_domain(a[i]);
      for (size_t j = 0; j < i; ++j) valid = valid && a[j] != a[i];
    }
    text += "]";
    EXPECT_EQ(objects.accepts(text), valid) << text;
  }
  // An enum of objects: {"a": 1, "b": 2} and {"b": 2, "a": 1} are one value.
  Schema enums(R"({"uniqueItems":true,"items":{"enum":[{"a":1,"b":2},{"b":2,"a":1},{"c":[1]}]}})");
  ASSERT_TRUE(enums.ok()) << enums.status().message();
  EXPECT_TRUE(enums.accepts(R"([{"a": 1, "b": 2}, {"c": [1]}])"));
  EXPECT_FALSE(enums.accepts(R"([{"a": 1, "b": 2}, {"b": 2, "a": 1}])"));
  EXPECT_FALSE(enums.accepts(R"([{"c": [1]}, {"c": [1]}])"));
  Schema any_of(R"({"uniqueItems":true,"items":{"type":"string",
                    "anyOf":[{"enum":["a","b"]},{"enum":["b","c",1]}]}})");
  ASSERT_TRUE(any_of.ok()) << any_of.status().message();
  EXPECT_TRUE(any_of.accepts(R"(["c", "a", "b"])"));
  EXPECT_FALSE(any_of.accepts(R"(["b", "b"])"));
  EXPECT_FALSE(any_of.accepts("[1]"));
  // 20 strings: refused unbounded (2^20 subsets), compiled with maxItems 2 (211 subsets).
  std::string twenty = "[";
  for (int i = 0; i < 20; ++i) twenty += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  twenty += "]";
  Schema unbounded(R"({"uniqueItems":true,"items":{"enum":)" + twenty + "}}");
  ASSERT_FALSE(unbounded.ok());
  EXPECT_NE(unbounded.status().message().find("uniqueItems"), std::string::npos);
  Schema bounded(R"({"uniqueItems":true,"maxItems":2,"items":{"enum":)" + twenty + "}}");
  ASSERT_TRUE(bounded.ok()) << bounded.status().message();
  EXPECT_TRUE(bounded.accepts(R"(["3", "19"])"));
  EXPECT_FALSE(bounded.accepts(R"(["3", "3"])"));
  EXPECT_FALSE(bounded.accepts(R"(["1", "2", "3"])"));
  // Free strings and objects stay refused.
  EXPECT_FALSE(Schema(R"({"uniqueItems":true,"maxItems":2,"items":{"type":"string"}})").ok());
  EXPECT_FALSE(Schema(R"({"uniqueItems":true,"items":{"type":"object",
      "properties":{"a":{"type":"string"}},"additionalProperties":false}})")
                   .ok());
}

// uniqueItems over a small integer range or a boolean/null type list: every array of up to 3
// elements from a wider set against the definition (in range, pairwise distinct).
TEST(grammar_json_schema_keywords, UniqueItemsOverSmallDomains) {
  Schema ints(R"({"type":"array","items":{"type":"integer","minimum":0,"exclusiveMaximum":3.5,
                  "description":"small"},"uniqueItems":true})");
  ASSERT_TRUE(ints.ok()) << ints.status().message();
  const std::vector<std::string> values = {"-1", "0", "1", "2", "3", "4", "1.5", "\"1\""};
  std::vector<std::vector<int>> arrays{{}};
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i].size() < 3)
      for (int v = 0; v < static_cast<int>(values.size()); ++v) {
        arrays.push_back(arrays[i]);
        arrays.back().push_back(v);
      }
  for (const auto& a : arrays) {
    std::string text = "[";
    bool valid = true;
    for (size_t i = 0; i < a.size(); ++i) {
      text += (i ? "," : "") + values[a[i]];
      valid = valid && a[i] >= 1 && a[i] <= 4;  // 0..3
      for (size_t j = 0; j < i; ++j) valid = valid && a[j] != a[i];
    }
    text += "]";
    EXPECT_EQ(ints.accepts(text), valid) << text;
  }
  Schema draft4(R"({"items":{"type":"integer","minimum":1,"exclusiveMinimum":true,
                    "maximum":3},"uniqueItems":true})");
  ASSERT_TRUE(draft4.ok()) << draft4.status().message();
  EXPECT_TRUE(draft4.accepts("[3, 2]"));
  EXPECT_FALSE(draft4.accepts("[1]"));
  EXPECT_FALSE(draft4.accepts("[2, 2]"));
  Schema bn(R"({"items":{"type":["boolean","null"]},"uniqueItems":true})");
  ASSERT_TRUE(bn.ok()) << bn.status().message();
  EXPECT_TRUE(bn.accepts("[null, true, false]"));
  EXPECT_FALSE(bn.accepts("[null, null]"));
  EXPECT_FALSE(bn.accepts("[1]"));
  // Too many values, one bound, or other keywords: still refused.
  for (const char* items :
       {R"({"type":"integer","minimum":0,"maximum":8})", R"({"type":"integer","minimum":0})",
        R"({"type":"integer","minimum":0,"maximum":3,"multipleOf":2})"}) {
    Schema refused(std::string(R"({"items":)") + items + R"(,"uniqueItems":true})");
    ASSERT_FALSE(refused.ok()) << items;
    EXPECT_NE(refused.status().message().find("uniqueItems"), std::string::npos);
  }
}

// unevaluatedProperties / unevaluatedItems without in-place applicators are additionalProperties
// / items; next to applicators they stay strict errors.
TEST(grammar_json_schema_keywords, UnevaluatedWithoutApplicators) {
  Schema props(R"({"type":"object","properties":{"a":{"type":"integer"}},
                   "unevaluatedProperties":false})");
  ASSERT_TRUE(props.ok()) << props.status().message();
  EXPECT_TRUE(props.accepts(R"({"a": 1})"));
  EXPECT_TRUE(props.accepts("{}"));
  EXPECT_FALSE(props.accepts(R"({"a": 1, "b": 2})"));
  Schema typed(
      R"({"properties":{"a":{"type":"integer"}},"unevaluatedProperties":{"type":"string"}})");
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  EXPECT_TRUE(typed.accepts(R"({"a": 1, "b": "s"})"));
  EXPECT_FALSE(typed.accepts(R"({"b": 2})"));
  // Next to additionalProperties it is vacuous.
  Schema vacuous(R"({"additionalProperties":{"type":"integer"},"unevaluatedProperties":false})");
  ASSERT_TRUE(vacuous.ok()) << vacuous.status().message();
  EXPECT_TRUE(vacuous.accepts(R"({"b": 2})"));
  Schema items(R"({"prefixItems":[{"type":"string"}],"unevaluatedItems":false})");
  ASSERT_TRUE(items.ok()) << items.status().message();
  EXPECT_TRUE(items.accepts(R"(["a"])"));
  EXPECT_FALSE(items.accepts(R"(["a", 1])"));
  Schema tuple(R"({"items":[{"type":"string"}],"unevaluatedItems":{"type":"integer"}})");
  ASSERT_TRUE(tuple.ok()) << tuple.status().message();
  EXPECT_TRUE(tuple.accepts(R"(["a", 1, 2])"));
  EXPECT_FALSE(tuple.accepts(R"(["a", "b"])"));
  Schema covered(R"({"items":{"type":"integer"},"unevaluatedItems":false})");
  ASSERT_TRUE(covered.ok()) << covered.status().message();
  EXPECT_TRUE(covered.accepts("[1, 2]"));
  for (const char* refused :
       {R"({"dependentSchemas":{"a":{"properties":{"b":{}}}},"unevaluatedProperties":false})",
        R"({"anyOf":[{"if":{"required":["a"]},"then":{"properties":{"b":{}}}}],
            "unevaluatedProperties":false})",
        R"({"contains":{"type":"string"},"unevaluatedItems":false})",
        R"({"anyOf":[{"prefixItems":[{}]}],"unevaluatedItems":false})"}) {
    Schema s(refused);
    ASSERT_FALSE(s.ok()) << refused;
    EXPECT_NE(s.status().message().find("next to in-place applicators"), std::string::npos)
        << s.status().message();
    EXPECT_TRUE(Schema(refused, lenient()).ok()) << refused;
  }
}

// grammar8: next to allOf / $ref / not the evaluated names are the union of the parts';
// if/then/else and oneOf/anyOf branches each bring their own.
TEST(grammar_json_schema_keywords, UnevaluatedNextToApplicators) {
  Schema all_of(R"({"$defs":{"b":{"properties":{"b":{"type":"integer"}}}},
      "properties":{"a":{}},"allOf":[{"$ref":"#/$defs/b"},{"not":{"required":["x"]}}],
      "unevaluatedProperties":false})");
  ASSERT_TRUE(all_of.ok()) << all_of.status().message();
  EXPECT_TRUE(all_of.accepts(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(all_of.accepts(R"({"b": "s"})"));
  EXPECT_FALSE(all_of.accepts(R"({"c": 1})"));
  EXPECT_FALSE(all_of.accepts(R"({"x": 1})"));
  Schema branches(R"({"type":"object","properties":{"t":{}},"oneOf":[
      {"type":"object","properties":{"t":{"const":"a"},"a":{"type":"integer"}},"required":["t"]},
      {"type":"object","properties":{"t":{"const":"b"},"b":{"type":"string"}},"required":["t"]}],
      "unevaluatedProperties":false})");
  ASSERT_TRUE(branches.ok()) << branches.status().message();
  EXPECT_TRUE(branches.accepts(R"({"t": "a", "a": 1})"));
  EXPECT_TRUE(branches.accepts(R"({"t": "b", "b": "s"})"));
  EXPECT_FALSE(branches.accepts(R"({"t": "a", "b": "s"})"));  // b is not evaluated by branch a
  EXPECT_FALSE(branches.accepts(R"({"t": "b", "a": 1})"));
  // Overlapping branches: {"x": 1} matches both, so the oneOf fails; the branch constraints
  // must not make them look disjoint (refused, or at least {"x": 1} rejected).
  Schema overlap(R"({"oneOf":[{"type":"object","required":["x"]},
      {"type":"object","properties":{"y":{}}}],"unevaluatedProperties":false})");
  if (overlap.ok()) {
    EXPECT_FALSE(overlap.accepts(R"({"x": 1})"));
    EXPECT_TRUE(overlap.accepts(R"({"y": 1})"));
  }
  Schema cond(R"({"type":"object","properties":{"k":{"enum":["n","s"]}},
      "if":{"properties":{"k":{"const":"n"}}},"then":{"properties":{"n":{"type":"integer"}}},
      "else":{"properties":{"s":{"type":"string"}}},"unevaluatedProperties":false})");
  ASSERT_TRUE(cond.ok()) << cond.status().message();
  EXPECT_TRUE(cond.accepts(R"({"k": "n", "n": 1})"));
  EXPECT_TRUE(cond.accepts(R"({"k": "s", "s": "x"})"));
  EXPECT_FALSE(cond.accepts(R"({"k": "n", "s": "x"})"));
  EXPECT_FALSE(cond.accepts(R"({"k": "s", "n": 1})"));
  Schema items(R"({"allOf":[{"minItems":1}],"prefixItems":[{"type":"integer"}],
                   "unevaluatedItems":false})");
  ASSERT_TRUE(items.ok()) << items.status().message();
  EXPECT_TRUE(items.accepts("[1]"));
  EXPECT_FALSE(items.accepts("[1, 2]"));
  EXPECT_FALSE(items.accepts("[]"));
  // A part with its own prefix: the rewrite is exact, but the merge of two item shapes is
  // still refused.
  EXPECT_FALSE(Schema(R"({"allOf":[{"prefixItems":[{}, {}]}],"prefixItems":[{}],
                          "unevaluatedItems":false})")
                   .ok());
  Schema covered(R"({"allOf":[{"additionalProperties":{"type":"integer"}}],
                     "unevaluatedProperties":false})");
  ASSERT_TRUE(covered.ok()) << covered.status().message();
  EXPECT_TRUE(covered.accepts(R"({"z": 1})"));
}

TEST(grammar_json_schema_keywords, IfThenElse) {
  Schema s(R"({"type":"object","properties":{"c":{"enum":["us","ca"]},"z":{"type":"string"}},
               "if":{"properties":{"c":{"const":"us"}}},
               "then":{"properties":{"z":{"pattern":"^[0-9]+$"}}},
               "else":{"properties":{"z":{"pattern":"^[a-z]+$"}}}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"({"c": "us", "z": "12"})"));
  EXPECT_TRUE(s.accepts(R"({"c": "ca", "z": "ab"})"));
  EXPECT_TRUE(s.accepts(R"({"z": "12"})"));  // no c: the condition holds vacuously
  EXPECT_FALSE(s.accepts(R"({"c": "us", "z": "ab"})"));
  EXPECT_FALSE(s.accepts(R"({"c": "ca", "z": "12"})"));
  EXPECT_FALSE(s.accepts(R"({"z": "ab"})"));
  Schema req(R"({"if":{"required":["a"]},"then":{"required":["b"]},"else":{"type":"string"}})");
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_TRUE(req.accepts(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(req.accepts(R"({"a": 1})"));
  EXPECT_TRUE(req.accepts(R"("x")"));
  EXPECT_FALSE(req.accepts("{}"));  // no a: else applies, which wants a string
  EXPECT_TRUE(req.accepts("1"));    // not an object: the condition holds vacuously
  Schema typed(R"({"if":{"type":"string"},"then":{"maxLength":1},"else":{"type":"null"}})");
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  EXPECT_TRUE(typed.accepts(R"("a")"));
  EXPECT_FALSE(typed.accepts(R"("ab")"));
  EXPECT_TRUE(typed.accepts("null"));
  EXPECT_FALSE(typed.accepts("1"));
  // A condition without a positive negation: refused, named; ignored when lenient.
  Schema hard(R"({"if":{"pattern":"^a"},"then":{"maxLength":1}})");
  ASSERT_FALSE(hard.ok());
  EXPECT_NE(hard.status().message().find("'if'"), std::string::npos);
  EXPECT_TRUE(Schema(R"({"if":{"pattern":"^a"},"then":{"maxLength":1}})", lenient()).ok());
}

TEST(grammar_json_schema_keywords, AllOfObjectShapesWithAdditionalProperties) {
  Schema s(R"({"allOf":[{"properties":{"a":{"type":"integer"}},"additionalProperties":false},
                        {"properties":{"a":{"minimum":1},"b":{}}}]})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s.accepts(R"({"a": 2})"));
  EXPECT_FALSE(s.accepts(R"({"a": 0})"));
  EXPECT_FALSE(s.accepts(R"({"b": 1})"));  // b is an additional property of the first part
  EXPECT_FALSE(s.accepts(R"({"c": 1})"));
}

}  // namespace
}  // namespace di::grammar
