// SPDX-License-Identifier: Apache-2.0
// Objects whose declared keys come in any order (grammar/json_schema/any_order.cc): every
// permutation of every subset, with and without duplicates, against what JSON Schema says.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "schema_helper.h"

namespace di::grammar::testing {
namespace {

std::string object_text(const std::vector<std::string>& keys) {
  std::string text = "{";
  for (size_t i = 0; i < keys.size(); ++i)
    text += std::string(i ? ", " : "") + "\"" + keys[i] + "\": 1";
  return text + "}";
}

// Every sequence of up to `len` keys drawn from `names` (repeats included), checked against
// `valid` (which sees the sequence, so duplicates are its to reject).
void expect_sequences(const Schema& s,
                      const std::vector<std::string>& names,
                      size_t len,
                      const std::function<bool(const std::vector<std::string>&)>& valid) {
  std::vector<std::string> seq;
  std::function<void()> rec = [&] {
    EXPECT_EQ(s.accepts(object_text(seq)), valid(seq)) << object_text(seq);
    if (seq.size() == len) return;
    for (const std::string& k : names) {
      seq.push_back(k);
      rec();
      seq.pop_back();
    }
  };
  rec();
}

bool distinct(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
}

bool has(const std::vector<std::string>& keys, const std::string& k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

TEST(grammar_json_schema_key_order, AnyOrderEachKeyOnceRequiredEnforced) {
  Schema s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
               "c":{"type":"integer"}},"required":["a","c"],"additionalProperties":false})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  expect_sequences(s, {"a", "b", "c", "x"}, 4, [](const std::vector<std::string>& k) {
    return distinct(k) && has(k, "a") && has(k, "c") && !has(k, "x");
  });
  EXPECT_FALSE(s.accepts(R"({"c": 1, "a": "s"})"));  // values keep their schemas
}

TEST(grammar_json_schema_key_order, AdditionalMembersBetweenDeclaredOnes) {
  Schema s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
               "required":["b"],"additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  // Extra keys may repeat among themselves as before (the grammar never writes them twice from
  // a declared slot); declared keys appear at most once.
  expect_sequences(s, {"a", "b", "x"}, 4, [](const std::vector<std::string>& k) {
    return has(k, "b") && std::count(k.begin(), k.end(), "a") <= 1 &&
           std::count(k.begin(), k.end(), "b") <= 1;
  });
  // A declared key cannot come back as an additional one with another value type.
  EXPECT_FALSE(s.accepts(R"({"b": 1, "x": 2, "a": 1, "b": 2})"));
  EXPECT_FALSE(s.accepts(R"({"x": 2, "b": "s"})"));
}

TEST(grammar_json_schema_key_order, CountedMembersInAnyOrder) {
  Schema s(R"({"properties":{"a":{},"b":{},"c":{}},"additionalProperties":false,
               "minProperties":1,"maxProperties":2})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  expect_sequences(s, {"a", "b", "c"}, 3, [](const std::vector<std::string>& k) {
    return distinct(k) && k.size() >= 1 && k.size() <= 2;
  });
}

TEST(grammar_json_schema_key_order, BoundKeepsSchemaOrder) {
  JsonSchemaOptions o;
  o.any_order_max_properties = 0;
  Schema ordered(R"({"properties":{"a":{},"b":{}}})", o);
  ASSERT_TRUE(ordered.ok());
  EXPECT_TRUE(ordered.accepts(R"({"a": 1, "b": 1})"));
  EXPECT_FALSE(ordered.accepts(R"({"b": 1, "a": 1})"));
  // Nine declared members are past the default bound of 8: schema order.
  std::string props;
  for (char c = 'a'; c <= 'i'; ++c) props += std::string(c == 'a' ? "" : ",") + "\"" + c + "\":{}";
  Schema wide(R"({"properties":{)" + props + "}}");
  ASSERT_TRUE(wide.ok());
  EXPECT_TRUE(wide.accepts(R"({"a": 1, "i": 1})"));
  EXPECT_FALSE(wide.accepts(R"({"i": 1, "a": 1})"));
  Schema eight(R"({"properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{}}})");
  ASSERT_TRUE(eight.ok());
  EXPECT_TRUE(eight.accepts(R"({"h": 1, "c": 1, "a": 1, "g": 1})"));
  EXPECT_FALSE(eight.accepts(R"({"h": 1, "c": 1, "h": 1})"));
}

TEST(grammar_json_schema_key_order, ConstAndEnumObjectsInAnyOrder) {
  Schema c(R"({"const":{"a":1,"b":{"x":true,"y":null}}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c.accepts(R"({"a": 1, "b": {"x": true, "y": null}})"));
  EXPECT_TRUE(c.accepts(R"({"b": {"y": null, "x": true}, "a": 1})"));
  EXPECT_FALSE(c.accepts(R"({"b": {"y": null, "x": true}})"));
  EXPECT_FALSE(c.accepts(R"({"a": 1, "b": {"x": true, "y": null}, "a": 1})"));
  Schema u(R"({"type":"array","uniqueItems":true,
               "items":{"enum":[{"a":1,"b":2},{"a":2,"b":1}]}})");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u.accepts(R"([{"b": 2, "a": 1}, {"a": 2, "b": 1}])"));
  // The same value in two key orders is still a repeat.
  EXPECT_FALSE(u.accepts(R"([{"a": 1, "b": 2}, {"b": 2, "a": 1}])"));
}

}  // namespace
}  // namespace di::grammar::testing
