// SPDX-License-Identifier: Apache-2.0
// dependentRequired, dependentSchemas, draft-7 dependencies (an anyOf over "key absent" / "key
// and its demands") and maxContains (through `not contains`): exact where they compile, strict
// errors naming the keyword otherwise, ignored when lenient.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "schema_helper.h"

namespace di::grammar {
namespace {

using testing::lenient;
using testing::Schema;

TEST(grammar_json_schema_dependencies, DependentRequired) {
  for (const char* kw : {"dependentRequired", "dependencies"}) {
    Schema s(std::string(R"({"properties":{"a":{},"b":{},"c":{}},")") + kw +
             R"(":{"a":["b"],"c":["a","b"]}})");
    ASSERT_TRUE(s.ok()) << kw << ": " << s.status().message();
    EXPECT_TRUE(s.accepts("{}"));
    EXPECT_TRUE(s.accepts(R"({"b": 1})"));
    EXPECT_TRUE(s.accepts(R"({"a": 1, "b": 2})"));
    EXPECT_TRUE(s.accepts(R"({"a": 1, "b": 2, "c": 3})"));
    EXPECT_FALSE(s.accepts(R"({"a": 1})"));
    EXPECT_FALSE(s.accepts(R"({"b": 1, "c": 3})"));
    EXPECT_TRUE(s.accepts(R"("not an object")"));
    EXPECT_TRUE(s.accepts("[1]"));
  }
  // Keys the schema requires or forbids cost no branch.
  Schema fixed(
      R"({"type":"object","properties":{"a":{},"b":{}},"required":["a"],"additionalProperties":false,
          "dependentRequired":{"a":["b"],"z":["a"]}})");
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  EXPECT_TRUE(fixed.accepts(R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(fixed.accepts(R"({"a": 1})"));
  EXPECT_FALSE(fixed.accepts("1"));
  // Undeclared keys allowed as additional properties.
  Schema extra(R"({"type":"object","dependentRequired":{"a":["b"]}})");
  ASSERT_TRUE(extra.ok()) << extra.status().message();
  EXPECT_TRUE(extra.accepts(R"({"b": 1})"));
  EXPECT_TRUE(extra.accepts(R"({"x": 1})"));
  EXPECT_FALSE(extra.accepts(R"({"a": 1})"));
  // The suite's instance order: what a key demands, then the key.
  Schema order(R"({"dependentRequired":{"bar":["foo"]}})");
  ASSERT_TRUE(order.ok());
  EXPECT_TRUE(order.accepts(R"({"foo": 1, "bar": 2})"));
}

TEST(grammar_json_schema_dependencies, DependentSchemas) {
  for (const char* kw : {"dependentSchemas", "dependencies"}) {
    Schema s(
        std::string(
            R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},")") +
        kw + R"(":{"a":{"required":["b"],"properties":{"b":{"maxLength":1}}},"b":true}})");
    ASSERT_TRUE(s.ok()) << kw << ": " << s.status().message();
    EXPECT_TRUE(s.accepts(R"({"a": 1, "b": "x"})"));
    EXPECT_FALSE(s.accepts(R"({"a": 1, "b": "xy"})"));
    EXPECT_FALSE(s.accepts(R"({"a": 1})"));
    EXPECT_TRUE(s.accepts(R"({"b": "xy"})"));
  }
  Schema never(R"({"type":"object","dependentSchemas":{"a":false}})");
  ASSERT_TRUE(never.ok()) << never.status().message();
  EXPECT_TRUE(never.accepts(R"({"b": 1})"));
  EXPECT_FALSE(never.accepts(R"({"a": 1})"));
}

// Every subset of keys a..e (in schema order, values 1) against a predicate over the subset.
void expect_subsets(const Schema& s, const std::function<bool(const std::set<char>&)>& valid) {
  for (int m = 0; m < 32; ++m) {
    std::set<char> keys;
    std::string text = "{";
    for (int i = 0; i < 5; ++i) {
      if (!(m >> i & 1)) continue;
      keys.insert(static_cast<char>('a' + i));
      text +=
          std::string(text.size() > 1 ? ", " : "") + "\"" + static_cast<char>('a' + i) + "\": 1";
    }
    text += "}";
    EXPECT_EQ(s.accepts(text), valid(keys)) << text;
  }
}

// Demands the merge used to refuse: `not {required}` on both sides (mutual exclusion), `not` of
// an object condition, alternatives on both sides, a shape with patternProperties.
TEST(grammar_json_schema_dependencies, DemandsWithNotAlternativesAndPatterns) {
  const std::string props = R"("properties":{"a":{},"b":{},"c":{},"d":{},"e":{}})";
  Schema exclusive("{" + props + R"(,"dependencies":{"a":{"not":{"required":["b"]}},
                                    "b":{"not":{"required":["a"]}}}})");
  ASSERT_TRUE(exclusive.ok()) << exclusive.status().message();
  expect_subsets(exclusive,
                 [](const std::set<char>& k) { return !(k.count('a') && k.count('b')); });
  Schema both_alts("{" + props + R"(,"anyOf":[{"required":["a"]},{"required":["b"]}],
      "dependencies":{"c":{"anyOf":[{"required":["d"]},{"required":["e"]}]}}})");
  ASSERT_TRUE(both_alts.ok()) << both_alts.status().message();
  expect_subsets(both_alts, [](const std::set<char>& k) {
    return (k.count('a') || k.count('b')) && (!k.count('c') || k.count('d') || k.count('e'));
  });
  Schema negated(R"({"dependencies":{"a":{"not":{"properties":{"b":{"type":"string"}},
                                                  "required":["b"]}}}})");
  ASSERT_TRUE(negated.ok()) << negated.status().message();
  // (The negation declares b, so b comes first: properties are written in schema order.)
  EXPECT_FALSE(negated.accepts(R"({"b": "x", "a": 1})"));
  EXPECT_TRUE(negated.accepts(R"({"b": 2, "a": 1})"));
  EXPECT_TRUE(negated.accepts(R"({"a": 1})"));
  EXPECT_TRUE(negated.accepts(R"({"b": "x"})"));
  Schema patterns(R"({"type":"object","properties":{"m":{},"s":{}},"patternProperties":{"^x-":{}},
                      "additionalProperties":false,"dependencies":{"s":["m"]}})");
  ASSERT_TRUE(patterns.ok()) << patterns.status().message();
  EXPECT_TRUE(patterns.accepts(R"({"m": 1, "s": 2})"));
  EXPECT_TRUE(patterns.accepts(R"({"m": 1, "x-a": 2})"));
  EXPECT_FALSE(patterns.accepts(R"({"s": 1})"));
  EXPECT_FALSE(patterns.accepts(R"({"s": 1, "x-a": 2})"));
  EXPECT_FALSE(patterns.accepts(R"({"q": 1})"));
  // A key that a pattern also matches: still refused, naming the keyword.
  Schema matched(R"({"type":"object","patternProperties":{"^s":{}},"additionalProperties":false,
                     "dependencies":{"s":["m"]}})");
  ASSERT_FALSE(matched.ok());
  EXPECT_NE(matched.status().message().find("dependencies"), std::string::npos);
}

// grammar8: a "k absent" part next to patternProperties that match k (finite patterns become
// declared keys), min/maxProperties over optional members (counted), a oneOf whose branches
// overlap next to a dependency (exactly one branch: Bi and not Bj), up to 8 open keys.
TEST(grammar_json_schema_dependencies, FinitePatternsCountsAndExclusiveOneOf) {
  const auto count = [](const std::set<char>& k) { return k.size(); };
  for (const char* bounds :
       {R"("minProperties":2)", R"("maxProperties":3)", R"("minProperties":1,"maxProperties":2)"}) {
    Schema s(std::string(R"({"type":"object","patternProperties":{"^[a-e]$":{}},
        "additionalProperties":false,"dependencies":{"a":["b"],"c":{"not":{"required":["d"]}}},)") +
             bounds + "}");
    ASSERT_TRUE(s.ok()) << bounds << ": " << s.status().message();
    const nlohmann::json b = nlohmann::json::parse(std::string("{") + bounds + "}");
    const size_t lo = b.value("minProperties", 0), hi = b.value("maxProperties", 5);
    expect_subsets(s, [&](const std::set<char>& k) {
      return (!k.count('a') || k.count('b')) && !(k.count('c') && k.count('d')) && count(k) >= lo &&
             count(k) <= hi;
    });
    EXPECT_FALSE(s.accepts(R"({"f": 1, "b": 2})"));
  }
  // A pattern whose language is too large to enumerate (or slow to: nothing accepted for 20
  // levels of 26-way branching) stays refused, quickly.
  const std::pair<const char*, const char*> big[] = {{"^[a-z]{20}x$", "aaaaaaaaaaaaaaaaaaaax"},
                                                     {"^[a-z]+$", "ab"}};
  for (const auto& [pattern, key] : big) {
    Schema s(std::string(R"({"type":"object","patternProperties":{")") + pattern +
             R"(":{}},"additionalProperties":false,"dependencies":{")" + key +
             R"(":{"not":{"required":["c"]}}}})");
    EXPECT_FALSE(s.ok()) << pattern;
  }
  // Counted members without any dependency, required ones included.
  Schema counted(R"({"properties":{"a":{},"b":{},"c":{},"d":{},"e":{}},"required":["c"],
                     "additionalProperties":false,"minProperties":2,"maxProperties":3})");
  ASSERT_TRUE(counted.ok()) << counted.status().message();
  expect_subsets(counted, [&](const std::set<char>& k) {
    return k.count('c') && count(k) >= 2 && count(k) <= 3;
  });
  EXPECT_FALSE(Schema(R"({"properties":{"a":{}},"additionalProperties":false,
                          "minProperties":2})")
                   .accepts("{}"));
  // Additional properties cannot be counted: still refused.
  EXPECT_FALSE(Schema(R"({"properties":{"a":{}},"minProperties":2})").ok());
  Schema one_of(R"({"properties":{"a":{},"b":{},"c":{},"d":{},"e":{}},
      "oneOf":[{"required":["a"]},{"required":["b"]}],"dependencies":{"c":["d"]}})");
  ASSERT_TRUE(one_of.ok()) << one_of.status().message();
  expect_subsets(one_of, [](const std::set<char>& k) {
    return (k.count('a') != k.count('b')) && (!k.count('c') || k.count('d'));
  });
  // Five open keys (32 combinations, those contradicting a list skipped).
  Schema five(R"({"properties":{"a":{},"b":{},"c":{},"d":{},"e":{}},"dependentRequired":
      {"a":["b"],"b":["c"],"c":["d"],"d":["e"],"e":["a"]}})");
  ASSERT_TRUE(five.ok()) << five.status().message();
  expect_subsets(five, [](const std::set<char>& k) { return k.empty() || k.size() == 5; });
}

TEST(grammar_json_schema_dependencies, RefusedFormsNameTheKeyword) {
  // Nine keys that may each be present or not (512 combinations), refused; so are more than 64
  // combinations that survive (seven independent keys).
  const std::string nine =
      R"({"type":"object","dependentRequired":{"a":["x"],"b":["x"],"c":["x"],"d":["x"],"e":["x"],
          "f":["x"],"g":["x"],"h":["x"],"i":["x"]}})";
  const std::string seven =
      R"({"type":"object","dependentRequired":{"a":["x"],"b":["y"],"c":["z"],"d":["w"],"e":["v"],
          "f":["u"],"g":["t"]}})";
  EXPECT_FALSE(Schema(seven).ok());
  Schema s(nine);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dependentRequired"), std::string::npos)
      << s.status().message();
  EXPECT_TRUE(Schema(nine, lenient()).ok());
  Schema bad(R"({"dependentRequired":{"a":[1]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dependentRequired"), std::string::npos);
  Schema with_enum(R"({"enum":[{"a":1}],"dependentRequired":{"a":["b"]}})");
  ASSERT_FALSE(with_enum.ok());
  EXPECT_NE(with_enum.status().message().find("dependentRequired"), std::string::npos);
}

TEST(grammar_json_schema_dependencies, MaxContainsThroughNotContains) {
  Schema typed(
      R"({"type":"array","items":{"type":["integer","string"]},"contains":{"type":"integer"},
          "minContains":1,"maxContains":2})");
  ASSERT_TRUE(typed.ok()) << typed.status().message();
  EXPECT_TRUE(typed.accepts(R"([1, "a", 2])"));
  EXPECT_TRUE(typed.accepts(R"(["a", 1, "b"])"));
  EXPECT_FALSE(typed.accepts("[1, 2, 3]"));
  EXPECT_FALSE(typed.accepts(R"(["a"])"));
  Schema finite(R"({"items":{"enum":[1,2,3]},"contains":{"const":1},"maxContains":1})");
  ASSERT_TRUE(finite.ok()) << finite.status().message();
  EXPECT_TRUE(finite.accepts("[2, 1, 3]"));
  EXPECT_FALSE(finite.accepts("[1, 2, 1]"));
  EXPECT_FALSE(finite.accepts("[2, 3]"));
  Schema zero(R"({"items":{"enum":[1,2]},"contains":{"const":1},"minContains":0,"maxContains":0})");
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  EXPECT_TRUE(zero.accepts("[2, 2]"));
  EXPECT_TRUE(zero.accepts("[]"));
  EXPECT_FALSE(zero.accepts("[2, 1]"));
  // `not {const: 1}` over any value has no grammar here.
  Schema free(R"({"contains":{"const":1},"maxContains":1})");
  ASSERT_FALSE(free.ok());
  EXPECT_NE(free.status().message().find("maxContains"), std::string::npos);
}

}  // namespace
}  // namespace di::grammar
