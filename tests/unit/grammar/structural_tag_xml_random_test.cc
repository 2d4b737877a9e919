// SPDX-License-Identifier: Apache-2.0
// The XML json_schema styles on random schemas (nested objects, arrays, combinators, $ref
// recursion, names with XML-sensitive and non-ASCII characters): every schema compiles or is a
// clean error (nothing derived from a request may abort), and a compiled grammar's masks can be
// filled along a few random bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/structural_tag/structural_tag.h"
#include "test_vocab.h"

namespace di::grammar {
namespace {

using OJson = nlohmann::ordered_json;

struct SchemaGen {
  std::mt19937 rng;
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); }
  std::string name() {
    static const char* kNames[] = {"a",  "b",  "city", "a<b", "x&y", "q\"t", "\xC3\xA9t\xC3\xA9",
                                   "_1", "1a", "a b",  "ab",  "abc"};
    return kNames[pick(12)];
  }
  OJson schema(int depth) {
    switch (depth <= 0 ? pick(6) : pick(14)) {
      case 0:
        return {{"type", "string"}};
      case 1:
        return {{"type", "integer"}, {"minimum", pick(5)}};
      case 2:
        return {{"enum", {"a", 1, nullptr, "b<c"}}};
      case 3:
        return {{"type", "string"}, {"maxLength", pick(4)}};
      case 4:
        return pick(2) ? OJson(true) : OJson::object();
      case 5:
        return {{"$ref", "#/$defs/n"}};
      case 6:
      case 7: {
        OJson o = {{"type", "object"}, {"properties", OJson::object()}};
        for (int i = pick(4); i-- > 0;) o["properties"][name()] = schema(depth - 1);
        if (pick(2) && !o["properties"].empty()) o["required"] = {o["properties"].begin().key()};
        const int ap = pick(3);
        if (ap == 0) o["additionalProperties"] = false;
        if (ap == 1) o["additionalProperties"] = schema(depth - 1);
        return o;
      }
      case 8:
        return {{"type", "array"}, {"items", schema(depth - 1)}, {"maxItems", pick(4)}};
      case 9:
        return {{"type", "array"},
                {"prefixItems", {schema(depth - 1), schema(depth - 1)}},
                {"minItems", pick(3)}};
      case 10:
        return {{"anyOf", {schema(depth - 1), schema(depth - 1)}}};
      case 11:
        return {{"type", {"string", "null"}}};
      case 12:
        return {{"type", "object"}, {"patternProperties", {{"^x", {{"type", "integer"}}}}}};
      default:
        return {{"type", "string"}, {"pattern", pick(2) ? "^[a-z]+$" : "a.b"}};
    }
  }
};

TEST(grammar_structural_tag_xml_random, SchemasCompileOrFailCleanly) {
  const auto trie = TokenTrie::build(testing::small_vocab());
  SchemaGen gen{std::mt19937(7)};
  int compiled = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    OJson root = gen.schema(3);
    if (!root.is_object() || !root.contains("properties")) root = {{"properties", {{"p", root}}}};
    root["$defs"] = {{"n", gen.schema(2)}};
    for (const char* style : {"cohere_xml", "kimi_k3_xml", "qwen_xml", "deepseek_xml"}) {
      const OJson tag = {
          {"format", {{"type", "json_schema"}, {"style", style}, {"json_schema", root}}}};
      auto g = structural_tag_to_grammar(tag.dump(), {}, trie.get());
      if (!g) {
        EXPECT_NE(g.status().message().find("format"), std::string::npos) << g.status().message();
        ++refused;
        continue;
      }
      auto cg = CompiledGrammar::create(*g, trie);
      ASSERT_TRUE(cg.has_value()) << style << " " << root.dump();
      GrammarMatcher m(*cg);
      TokenBitmask mask;
      for (int step = 0; step < 4; ++step) {
        m.fill_next_token_bitmask(mask);
        const int32_t t = static_cast<int32_t>(gen.rng() % trie->vocab_size());
        if (mask.test(t) && t != trie->eos_id()) {
          EXPECT_TRUE(m.accept_token(t));
        }
      }
      ++compiled;
    }
  }
  // Most schemas compile (patternProperties at the top, oneOf overlaps etc. are refused).
  EXPECT_GT(compiled, 600);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace di::grammar
