// Token-mask cost of structural tags (TagDispatch) and tool_choice grammars on the real
// 129,280-entry vocabulary: a representative reply is tokenized with our BPE and replayed
// through a matcher; every step's fill_next_token_bitmask is timed in thread CPU time, first on
// a freshly compiled grammar (cold: every state's first visit) and then again on the same one
// (warm: cached). Each mask is checked to allow the token that follows.
//   grammar_tag_bench TOKENIZER_JSON
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/grammar_constraint.h"
#include "api/tool_call_grammar.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "recipe/tokenizer/tokenizer.h"

namespace {

using namespace di;

double thread_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

struct Stats {
  std::vector<double> us;
  double pct(double p) {
    std::sort(us.begin(), us.end());
    return us.empty() ? 0 : us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  }
};

// Replays `ids`; false if a mask refuses the next token.
bool replay(const std::shared_ptr<const grammar::CompiledGrammar>& g,
            const std::vector<int32_t>& ids,
            Stats& s) {
  grammar::GrammarMatcher m(g);
  grammar::TokenBitmask mask;
  for (size_t i = 0; i <= ids.size(); ++i) {
    const double t0 = thread_us();
    m.fill_next_token_bitmask(mask);
    s.us.push_back(thread_us() - t0);
    const int32_t next = i < ids.size() ? ids[i] : g->trie().eos_id();
    if (!mask.test(next) || (i < ids.size() && !m.accept_token(next))) return false;
  }
  return true;
}

const char* kSchemaW =
    R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
    "days": {"type": "integer", "minimum": 1, "maximum": 9}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "days"]})";
const char* kSchemaL =
    R"({"type": "object", "properties": {"id": {"type": "integer", "minimum": 0,
    "maximum": 999}, "exact": {"type": "boolean"}}, "required": ["id"]})";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: grammar_tag_bench TOKENIZER_JSON\n");
    return 2;
  }
  auto tok = recipe::Tokenizer::from_file(argv[1]);
  if (!tok) return std::fprintf(stderr, "%s\n", tok.status().to_string().c_str()), 1;
  auto vocab = api::vocabulary_from_tokenizer(*tok, 129280);
  if (!vocab) return std::fprintf(stderr, "%s\n", vocab.status().to_string().c_str()), 1;
  auto trie = grammar::TokenTrie::build(*vocab);

  const std::string tag = std::string(R"({"type": "structural_tag", "triggers": ["<f="],
      "structures": [{"begin": "<f=w>", "end": "</f>", "schema": )") +
                          kSchemaW + R"(}, {"begin": "<f=l>", "end": "</f>", "schema": )" +
                          kSchemaL + "}]}";
  nlohmann::ordered_json spec = {
      {"tools",
       {{{"name", "get_weather"}, {"parameters", nlohmann::ordered_json::parse(kSchemaW)}},
        {{"name", "lookup"}, {"parameters", nlohmann::ordered_json::parse(kSchemaL)}}}},
      {"name", nullptr}};
  const std::string d =
      "\xEF\xBD\x9C"
      "DSML"
      "\xEF\xBD\x9C";
  // grammar10: the deepseek_xml style inside the V4 invoke tag, and a bounded reasoning block.
  const std::string ds_tag = std::string(R"({"type": "structural_tag", "format": {"type": "tag",
      "begin": "<｜DSML｜invoke name=\"get_weather\">\n", "end": "</｜DSML｜invoke>", "content":
      {"type": "json_schema", "style": "deepseek_xml", "json_schema": )") +
                             kSchemaW + "}}}";
  // grammar11: kimi_k3_xml (open schema: undeclared arguments allowed) and cohere_xml.
  const std::string kimi_tag = std::string(R"({"type": "structural_tag", "format": {"type": "tag",
      "begin": "<|open|>call tool=\"get_weather\"<|sep|>", "end": "<|close|>call<|sep|>",
      "content": {"type": "json_schema", "style": "kimi_k3_xml", "json_schema": )") +
                               kSchemaW + "}}}";
  const std::string cohere_tag = std::string(R"({"type": "structural_tag", "format": {"type":
      "tag", "begin": "<cofl:tool_call name=\"get_weather\">", "end": "</cofl:tool_call>",
      "content": {"type": "json_schema", "style": "cohere_xml", "json_schema": )") +
                                 kSchemaW + "}}}";
  const std::string think = R"({"type": "structural_tag", "format": {"type": "sequence",
      "elements": [{"type": "tag", "begin": "<think>", "end": "</think>", "content": {"type":
      "any_text", "max_chars": 4096}}, {"type": "const_string", "value": "ok"}]}})";
  struct Case {
    const char* name;
    std::string text;
    std::function<grammar::GrammarCompiler::Result(grammar::GrammarCompiler&)> compile;
  } cases[] = {
      {"structural tag (2 structures, trigger <f=)",
       "Sure, let me check the weather for you, then look the id up. <f=w>{\"city\": "
       "\"Paris\", \"days\": 3}</f> The forecast is in; now the record. <f=l>{\"id\": 42, "
       "\"exact\": true}</f> Done: both calls were made, results follow below.",
       [&](grammar::GrammarCompiler& c) { return c.compile_structural_tag(tag); }},
      {"tool_choice required (2 tools, DSML)",
       "<" + d + " calls>\n<" + d + " invoke name=\"get_weather\">\n<" + d +
           " parameter name=\"city\" string=\"false\">\"Paris\"</" + d + " parameter>\n<" + d +
           " parameter name=\"days\" string=\"false\">3</" + d + " parameter>\n</" + d +
           " invoke>\n<" + d + " invoke name=\"lookup\">\n<" + d +
           " parameter name=\"id\" string=\"false\">42</" + d + " parameter>\n</" + d +
           " invoke>\n</" + d + " calls>",
       [&](grammar::GrammarCompiler& c) {
         return c.compile_keyed("bench", [&] { return api::tool_call_grammar(spec); });
       }},
      {"deepseek_xml in a DSML invoke tag (1 tool, 3 parameters)",
       "<" + d + "invoke name=\"get_weather\">\n<" + d +
           "parameter name=\"city\" string=\"false\">\"Paris\"</" + d + "parameter>\n<" + d +
           "parameter name=\"unit\" string=\"true\">c</" + d + "parameter>\n<" + d +
           "parameter name=\"days\" string=\"false\">3</" + d + "parameter>\n</" + d + "invoke>",
       [&](grammar::GrammarCompiler& c) { return c.compile_structural_tag(ds_tag); }},
      {"kimi_k3_xml in a call tag (1 tool, 3 arguments, one undeclared)",
       "<|open|>call tool=\"get_weather\"<|sep|>\n<|open|>argument key=\"city\" "
       "type=\"string\"<|sep|>Paris<|close|>argument<|sep|>\n<|open|>argument key=\"days\" "
       "type=\"number\"<|sep|>3<|close|>argument<|sep|>\n<|open|>argument key=\"note\" "
       "type=\"string\"<|sep|>by train<|close|>argument<|sep|>\n<|close|>call<|sep|>",
       [&](grammar::GrammarCompiler& c) { return c.compile_structural_tag(kimi_tag); }},
      {"cohere_xml in a tool-call tag (1 tool, 3 parameters)",
       "<cofl:tool_call name=\"get_weather\">\n<cofl:value name=\"city\" "
       "type=\"raw\">Paris</cofl:value>\n<cofl:value name=\"unit\" type=\"raw\">c</cofl:value>"
       "\n<cofl:value name=\"days\" type=\"json\">3</cofl:value>\n</cofl:tool_call>",
       [&](grammar::GrammarCompiler& c) { return c.compile_structural_tag(cohere_tag); }},
      {"any_text max_chars 4096 in <think> (then \"ok\")",
       "<think>The user wants the weather in Paris for three days; I should call the tool with "
       "the city and the number of days, then summarise the forecast briefly.</think>ok",
       [&](grammar::GrammarCompiler& c) { return c.compile_structural_tag(think); }},
  };
  std::printf("| grammar | masks | compile ms | cold p50 / p99 / max us | warm p50 / max us |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (Case& c : cases) {
    grammar::GrammarCompiler compiler(trie);  // fresh mask caches per case
    const double t0 = thread_us();
    auto g = c.compile(compiler);
    const double compile_ms = (thread_us() - t0) / 1e3;
    if (!g) return std::fprintf(stderr, "%s: %s\n", c.name, g.status().to_string().c_str()), 1;
    const auto ids = tok->encode(c.text, recipe::SpecialTokens::kNone);
    Stats cold, warm;
    if (!replay(*g, ids, cold) || !replay(*g, ids, warm))
      return std::fprintf(stderr, "%s: a mask refused the reply\n", c.name), 1;
    std::printf("| %s | %zu | %.2f | %.1f / %.1f / %.1f | %.1f / %.1f |\n", c.name, cold.us.size(),
                compile_ms, cold.pct(0.5), cold.pct(0.99), cold.pct(1.0), warm.pct(0.5),
                warm.pct(1.0));
  }
  return 0;
}
