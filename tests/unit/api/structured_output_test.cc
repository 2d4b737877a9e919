#include "api/structured_output.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "api/grammar_constraint.h"
#include "grammar/compiler.h"

namespace di::api {
namespace {

using nlohmann::json;
using Kind = StructuredOutput::Kind;

std::optional<StructuredOutput> parse_ok(const char* body) {
  auto r = parse_structured_output(json::parse(body));
  EXPECT_TRUE(r) << body << ": " << r.status().message();
  return r ? *r : std::nullopt;
}

std::string parse_error(const char* body) {
  auto r = parse_structured_output(json::parse(body));
  EXPECT_FALSE(r) << body;
  return r ? "" : r.status().message();
}

TEST(StructuredOutputParse, EveryDialect) {
  EXPECT_FALSE(parse_ok(R"({"prompt": "x"})"));
  EXPECT_FALSE(parse_ok(R"({"response_format": {"type": "text"}})"));
  auto a = parse_ok(
      R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer"}}}})");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(a->text), json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(parse_ok(R"({"response_format": {"type": "json_object"}})")->kind, Kind::kJsonObject);
  EXPECT_EQ(parse_ok(R"({"structured_outputs": {"regex": "a+"}})")->text, "a+");
  auto c = parse_ok(R"({"structured_outputs": {"choice": ["x", "y"]}})");
  EXPECT_EQ(c->kind, Kind::kChoice);
  EXPECT_EQ(c->choices, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(parse_ok(R"({"structured_outputs": {"grammar": "root ::= \"a\""}})")->kind,
            Kind::kGrammar);
  auto j = parse_ok(R"({"structured_outputs": {"json": "{\"type\": \"null\"}", "lenient": true}})");
  EXPECT_EQ(j->kind, Kind::kJsonSchema);
  EXPECT_TRUE(j->lenient);
  EXPECT_EQ(parse_ok(R"({"guided_json": {"type": "null"}})")->kind, Kind::kJsonSchema);
  EXPECT_EQ(parse_ok(R"({"guided_choice": ["a"]})")->kind, Kind::kChoice);
  EXPECT_EQ(parse_ok(R"({"regex": "[0-9]"})")->kind, Kind::kRegex);  // SGLang
  EXPECT_EQ(parse_ok(R"({"ebnf": "root ::= \"a\""})")->kind, Kind::kGrammar);
  EXPECT_EQ(parse_ok(R"({"json_schema": "{}"})")->kind, Kind::kJsonSchema);
  auto st = parse_ok(R"({"response_format": {"type": "structural_tag", "triggers": ["<f"],
      "structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}]}})");
  EXPECT_EQ(st->kind, Kind::kStructuralTag);
  EXPECT_EQ(json::parse(st->text)["triggers"][0], "<f");
  auto vs = parse_ok(R"({"structured_outputs": {"structural_tag":
      "{\"type\": \"structural_tag\", \"format\": {\"type\": \"const_string\", \"value\": \"x\"}}"}})");
  EXPECT_EQ(vs->kind, Kind::kStructuralTag);
  EXPECT_EQ(json::parse(vs->text)["format"]["value"], "x");
}

// A structural tag through the compiler and the constraint: free text, then the trigger forces
// its begin and the schema.
TEST(GrammarConstraint, StructuralTagDispatch) {
  grammar::Vocabulary v;
  v.token_bytes = {"<eos>", "a", "<", "<f", ">", "1", "</f>", "x<f>", "b", "<fx"};
  v.special_ids = {0};
  v.eos_id = 0;
  grammar::GrammarCompiler compiler(grammar::TokenTrie::build(v));
  auto g = compiler.compile_structural_tag(R"({"structures": [{"begin": "<f>",
      "schema": {"type": "integer"}, "end": "</f>"}], "triggers": ["<f"]})");
  ASSERT_TRUE(g) << g.status().message();
  GrammarConstraint c(*g, std::nullopt);
  std::vector<float> logits(10, 0.0f);
  c.apply(logits);
  // Every token but "<fx" (it completes the trigger, then breaks the begin "<f>").
  for (int i = 0; i < 10; ++i) EXPECT_EQ(std::isfinite(logits[i]), i != 9) << i;
  c.accept(7);  // "x<f>": free text, the trigger and the begin in one token
  logits.assign(10, 0.0f);
  c.apply(logits);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(std::isfinite(logits[i]), i == 5) << i;  // the integer
  auto bad = compiler.compile_structural_tag(R"({"structures": [], "triggers": ["<f"]})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("structural_tag.structures: must be a non-empty array"),
            std::string::npos);
}

// xgrammar's newer structural-tag formats through the request path: a triggered_tags nested in
// a tag (with excludes) and a tags_with_separator compile; what stays unsupported is a 400 that
// names the field.
TEST(GrammarConstraint, StructuralTagFormatsAndTheir400s) {
  grammar::Vocabulary v;
  v.token_bytes = {"<eos>", "a", "<", "<r>", "</r>", "<t>", "</t>", "1", ",", "bad"};
  v.special_ids = {0};
  v.eos_id = 0;
  grammar::GrammarCompiler compiler(grammar::TokenTrie::build(v));
  auto nested = parse_ok(R"({"response_format": {"type": "structural_tag", "format": {
      "type": "tag", "begin": "<r>", "end": "</r>", "content": {"type": "triggered_tags",
      "triggers": ["<t"], "excludes": ["bad"], "tags": [{"begin": "<t>", "end": "</t>",
      "content": {"type": "json_schema", "json_schema": {"type": "integer"}}}]}}}})");
  ASSERT_TRUE(nested);
  auto g = compiler.compile_structural_tag(nested->text);
  ASSERT_TRUE(g) << g.status().message();
  GrammarConstraint c(*g, std::nullopt);
  for (int32_t t : {3, 1, 5, 7, 6}) c.accept(t);  // <r>a<t>1</t>
  std::vector<float> logits(10, 0.0f);
  c.apply(logits);
  EXPECT_TRUE(std::isfinite(logits[4]));   // </r> closes the tag
  EXPECT_FALSE(std::isfinite(logits[9]));  // "bad" is excluded from the free text
  EXPECT_FALSE(std::isfinite(logits[0]));  // not before </r>
  auto sep = parse_ok(R"({"structured_outputs": {"structural_tag": {"type": "structural_tag",
      "format": {"type": "tags_with_separator", "separator": ",", "tags": [{"begin": "<t>",
      "end": "</t>", "content": {"type": "const_string", "value": "1"}}]}}}})");
  ASSERT_TRUE(sep);
  EXPECT_TRUE(compiler.compile_structural_tag(sep->text)) << sep->text;
  auto middle = parse_ok(R"({"response_format": {"type": "structural_tag", "format": {
      "type": "sequence", "elements": [{"type": "any_text"},
      {"type": "const_string", "value": "x"}]}}})");
  ASSERT_TRUE(middle);
  auto bad = compiler.compile_structural_tag(middle->text);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("format.elements[0]: an unlimited format"),
            std::string::npos)
      << bad.status().message();
}

TEST(StructuredOutputParse, ErrorsSayWhy) {
  EXPECT_NE(parse_error(R"({"regex": "a", "guided_choice": ["a"]})").find("at most one"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"structured_outputs": {"structural_tag": "[1]"}})")
                .find("structured_outputs.structural_tag: is not a JSON object"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"structured_outputs": {"structural_tag": 5}})").find("structural_tag"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"response_format": {"type": "xml"}})").find("xml"), std::string::npos);
  EXPECT_NE(parse_error(R"({"response_format": {"type": "json_schema"}})").find("json_schema"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"guided_json": "{not json"})").find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"structured_outputs": {"choice": []}})").find("choice"),
            std::string::npos);
  EXPECT_NE(
      parse_error(R"({"structured_outputs": {"regex": "a", "choice": ["a"]}})").find("exactly one"),
      std::string::npos);
}

// ids: 0 EOS, 1 "a", 2 "b", 3 "ab", 4 "</think>" (control), 5 "c"
struct Fixture {
  Fixture() {
    grammar::Vocabulary v;
    v.token_bytes = {"<eos>", "a", "b", "ab", "</think>", "c"};
    v.special_ids = {0, 4};
    v.eos_id = 0;
    compiler = std::make_unique<grammar::GrammarCompiler>(grammar::TokenTrie::build(v));
  }
  std::shared_ptr<const grammar::CompiledGrammar> regex(const char* re) {
    auto r = compiler->compile_regex(re);
    EXPECT_TRUE(r);
    return *r;
  }
  std::unique_ptr<grammar::GrammarCompiler> compiler;
};

std::vector<int> allowed(engine::TokenConstraint& c) {
  std::vector<float> logits(6, 0.0f);
  c.apply(logits);
  std::vector<int> out;
  for (int i = 0; i < 6; ++i)
    if (std::isfinite(logits[i])) out.push_back(i);
  // The bitmask a backend samples with (engine/device_sampling.h) allows the same tokens.
  std::vector<uint32_t> words(1, 0xdeadbeefu);
  const auto kind = c.allowed_bitmask(words);
  std::vector<int> from_bits;
  for (int i = 0; i < 6; ++i) {
    if (kind == engine::TokenConstraint::Mask::kNone || ((words[0] >> i) & 1u))
      from_bits.push_back(i);
  }
  EXPECT_NE(kind, engine::TokenConstraint::Mask::kUnsupported);
  EXPECT_EQ(from_bits, out);
  return out;
}

TEST(GrammarConstraint, MasksAdvancesAndRollsBack) {
  Fixture f;
  GrammarConstraint c(f.regex("ab"), std::nullopt);
  EXPECT_EQ(allowed(c), (std::vector<int>{1, 3}));
  c.accept(1);
  EXPECT_EQ(allowed(c), (std::vector<int>{2}));
  c.accept(2);
  EXPECT_EQ(allowed(c), (std::vector<int>{0}));  // complete: only EOS
  c.rollback(1);
  EXPECT_EQ(allowed(c), (std::vector<int>{2}));
  c.rollback(1);
  EXPECT_EQ(allowed(c), (std::vector<int>{1, 3}));
  EXPECT_TRUE(c.ok());
}

TEST(GrammarConstraint, ThinkingAppliesOnlyAfterTheEndMarker) {
  Fixture f;
  GrammarConstraint c(f.regex("c"), /*activate_after=*/4);
  EXPECT_EQ(allowed(c).size(), 6u);  // reasoning is free
  c.accept(1);
  c.accept(2);
  EXPECT_FALSE(c.active());
  c.accept(4);  // </think>
  EXPECT_TRUE(c.active());
  EXPECT_EQ(allowed(c), (std::vector<int>{5}));
  c.accept(5);
  EXPECT_EQ(allowed(c), (std::vector<int>{0}));
  c.rollback(2);  // back before </think>: free again
  EXPECT_FALSE(c.active());
  EXPECT_EQ(allowed(c).size(), 6u);
  c.accept(4);
  EXPECT_EQ(allowed(c), (std::vector<int>{5}));
}

// A request's `ebnf` with GBNF token terminals, through the constraint: `<[4]>` is the control
// token "</think>" as a unit, `!<[1]>` any text token but "a".
TEST(GrammarConstraint, EbnfTokenTerminals) {
  Fixture f;
  auto so = parse_ok(R"({"ebnf": "root ::= \"a\" <[4]> !<[1]>"})");
  ASSERT_TRUE(so);
  auto g = f.compiler->compile_ebnf(so->text);
  ASSERT_TRUE(g) << g.status().message();
  GrammarConstraint c(*g, std::nullopt);
  EXPECT_EQ(allowed(c), (std::vector<int>{1}));
  c.accept(1);
  EXPECT_EQ(allowed(c), (std::vector<int>{4}));
  c.accept(4);
  EXPECT_EQ(allowed(c), (std::vector<int>{2, 3, 5}));
  c.accept(3);
  EXPECT_EQ(allowed(c), (std::vector<int>{0}));
  c.rollback(2);
  EXPECT_EQ(allowed(c), (std::vector<int>{4}));
  EXPECT_TRUE(c.ok());
  auto bad = f.compiler->compile_ebnf("root ::= <[6]>");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("outside the vocabulary"), std::string::npos);
}

TEST(GrammarConstraint, AfterTheEndOnlyEosRemains) {
  Fixture f;
  GrammarConstraint c(f.regex("a"), std::nullopt);
  c.accept(1);
  c.accept(0);  // EOS accepted: the grammar has ended
  EXPECT_EQ(allowed(c), (std::vector<int>{0}));
}

}  // namespace
}  // namespace di::api
