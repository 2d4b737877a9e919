// The streaming response parser: reasoning/content split, DSML tool calls, stop strings,
// malformed markup, held-back partial markers, and chunking invariance (the accumulated result
// must not depend on how the text is split).
#include "recipe/parse/response_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace di::recipe::testing {
namespace {

ParsedResponse parse_chunks(const ParserOptions& opts, const std::vector<std::string>& chunks) {
  ResponseParser p(opts);
  ParsedResponse r;
  for (const auto& c : chunks) accumulate(r, p.push(c));
  accumulate(r, p.finish());
  return r;
}

ParsedResponse parse_whole(const ParserOptions& opts, const std::string& text) {
  return parse_chunks(opts, {text});
}

bool same(const ParsedResponse& a, const ParsedResponse& b) {
  if (a.reasoning_content != b.reasoning_content || a.content != b.content ||
      a.malformed_tool_call != b.malformed_tool_call ||
      a.tool_calls.size() != b.tool_calls.size()) {
    return false;
  }
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].index != b.tool_calls[i].index ||
        a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments) {
      return false;
    }
  }
  return true;
}

std::string describe(const ParsedResponse& r) {
  std::string s = "reasoning=[";
  s += r.reasoning_content;
  s += "] content=[";
  s += r.content;
  s += "] calls=";
  for (const auto& c : r.tool_calls) {
    s += '(';
    s += std::to_string(c.index);
    s += ' ';
    s += c.name;
    s += ' ';
    s += c.arguments;
    s += ')';
  }
  if (r.malformed_tool_call) s += " malformed";
  return s;
}

// Whole, byte by byte and `rounds` random chunkings must agree.
void expect_chunking_invariant(const ParserOptions& opts,
                               const std::string& text,
                               int rounds,
                               uint32_t seed) {
  const ParsedResponse whole = parse_whole(opts, text);
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  const ParsedResponse by_byte = parse_chunks(opts, bytes);
  EXPECT_TRUE(same(whole, by_byte)) << describe(whole) << "\nvs\n" << describe(by_byte);
  std::mt19937 rng(seed);
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> chunks;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = std::min<size_t>(text.size() - i, rng() % 12);  // empty chunks too
      chunks.push_back(text.substr(i, n));
      i += n;
    }
    const ParsedResponse got = parse_chunks(opts, chunks);
    ASSERT_TRUE(same(whole, got)) << "text=" << text << "\n"
                                  << describe(whole) << "\nvs\n"
                                  << describe(got);
  }
}

const std::string kTwoCalls =
    "Sure.\n\n<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris \"FR\"\n</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

TEST(ResponseParser, ReasoningThenContent) {
  const auto r = parse_whole({true, {}}, "\n\nLet me think.\n</think>The answer is 4.");
  EXPECT_EQ(r.reasoning_content, "Let me think.\n");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_FALSE(r.malformed_tool_call);
  // Without </think> everything is reasoning.
  EXPECT_EQ(parse_whole({true, {}}, "still thinking").reasoning_content, "still thinking");
}

TEST(ResponseParser, ChatModeAndStrayEndThink) {
  const auto r = parse_whole({false, {}}, "\nHi</think> there</think>");
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.content, "\nHi there");
}

TEST(ResponseParser, ToolCalls) {
  const auto r = parse_whole({false, {}}, kTwoCalls);
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 2u) << describe(r);
  EXPECT_EQ(r.tool_calls[0].index, 0);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris \\\"FR\\\"\\n\", \"days\": 3}");
  EXPECT_EQ(r.tool_calls[1].index, 1);
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  EXPECT_FALSE(r.malformed_tool_call);
}

TEST(ResponseParser, ToolCallsAfterReasoningAndV4Spelling) {
  const auto r = parse_whole(
      {true, {}},
      "plan</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"x\" string=\"false\">{\"a\": [1, 2]}</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"y\" string=\"false\">not json</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(r.reasoning_content, "plan");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u) << describe(r);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"x\": {\"a\": [1, 2]}, \"y\": \"not json\"}");
}

TEST(ResponseParser, ToolCallsEmittedAsEachInvokeCompletes) {
  ResponseParser p({false, {}});
  const size_t first_end =
      kTwoCalls.find("</｜DSML｜ invoke>") + std::string("</｜DSML｜ invoke>").size();
  ParsedResponse r;
  accumulate(r, p.push(kTwoCalls.substr(0, first_end - 1)));
  EXPECT_TRUE(r.tool_calls.empty());
  accumulate(r, p.push(kTwoCalls.substr(first_end - 1, 1)));
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
}

TEST(ResponseParser, StopStringsApplyToContentOnly) {
  auto r = parse_whole({false, {"STOP"}}, "Hello STOP world");
  EXPECT_EQ(r.content, "Hello ");
  r = parse_whole({true, {"STOP", "\n\nUser:"}}, "a STOP b</think>c\n\nUser: d STOP");
  EXPECT_EQ(r.reasoning_content, "a STOP b");
  EXPECT_EQ(r.content, "c");
  ResponseParser p({false, {"xyz", "", "yz!"}});
  ParsedResponse acc;
  accumulate(acc, p.push("abc xy"));
  EXPECT_EQ(acc.content, "abc ");  // "xy" might start a stop string
  accumulate(acc, p.push("z!!"));
  EXPECT_EQ(acc.content, "abc ");
  EXPECT_TRUE(p.stopped());
  EXPECT_EQ(p.stop_string(), "xyz");
  EXPECT_TRUE(p.push("more").empty());
  EXPECT_TRUE(p.finish().empty());
}

TEST(ResponseParser, PartialMarkersAreHeldBack) {
  ResponseParser p({true, {}});
  ParsedResponse r;
  accumulate(r, p.push("\nabc</thi"));
  EXPECT_EQ(r.reasoning_content, "abc");
  accumulate(r, p.push("nk>def\n"));
  EXPECT_EQ(r.content, "def");  // the newline might precede a tool block
  accumulate(r, p.push("\n<｜DS"));
  EXPECT_EQ(r.content, "def");
  accumulate(r, p.push("X"));
  EXPECT_EQ(r.content, "def\n\n<｜DSX");
  accumulate(r, p.push("</thi"));
  accumulate(r, p.finish());
  EXPECT_EQ(r.content, "def\n\n<｜DSX</thi");
}

TEST(ResponseParser, Utf8IsNotSplit) {
  ResponseParser p({false, {}});
  const std::string s = "é中😀";
  std::vector<Delta> all;
  for (const char c : s) {
    for (auto& d : p.push(std::string(1, c))) all.push_back(d);
  }
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].content, "é");
  EXPECT_EQ(all[1].content, "中");
  EXPECT_EQ(all[2].content, "😀");
}

TEST(ResponseParser, MalformedMarkupDegradesToContent) {
  const std::string bad = "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke nam=\"x\">oops";
  auto r = parse_whole({false, {}}, "Hi" + bad);
  EXPECT_EQ(r.content, "Hi" + bad);
  EXPECT_TRUE(r.malformed_tool_call);
  EXPECT_TRUE(r.tool_calls.empty());
  // A finished call survives; the broken rest becomes content.
  const std::string first = "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n</｜DSML｜ invoke>";
  const std::string rest =
      "\n<｜DSML｜ invoke name=\"g\">\n<｜DSML｜ parameter name=\"k\" string=\"maybe\">1";
  r = parse_whole({false, {}}, first + rest);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "f");
  EXPECT_EQ(r.content, rest);
  EXPECT_TRUE(r.malformed_tool_call);
  // Unterminated at the end of output; stop strings still apply to the recovered text.
  r = parse_whole({false, {"END"}}, "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">END x");
  EXPECT_EQ(r.content, "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">");
  EXPECT_TRUE(r.malformed_tool_call);
  // Tool markup is not parsed again after a failure.
  r = parse_whole({false, {}}, "<｜DSML｜ x\n" + kTwoCalls);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "<｜DSML｜ x\n" + kTwoCalls);
}

TEST(ResponseParser, ContentAfterBlockAndTrailingNewlines) {
  auto r = parse_whole({false, {}}, kTwoCalls + "\nafter\n\n");
  EXPECT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.content, "Sure.\nafter\n\n");
}

TEST(ResponseParser, ChunkingInvariance) {
  const std::vector<std::pair<ParserOptions, std::string>> cases = {
      {{true, {}}, "\n\nLet me think.\n</think>The answer is 4."},
      {{false, {}}, kTwoCalls},
      {{true, {"STOP"}}, "r STOP </think>" + kTwoCalls + "\ntail STOP more"},
      {{false, {"\n\n<", "é中"}}, "x\n\n<y é中 z"},
      {{false, {}}, "Hi\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke nam=\"x\">oops</think>"},
      {{false, {}},
       "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n</｜DSML｜ invoke>\n<｜DSML｜ "},
      {{true, {"</think>"}}, "\n\n\n</think>\n\n\n</think>\n\n"},
      {{false, {"ab", "abc", "bcd"}}, "xxabcdabxbcd"},
      {{false, {}},
       "é中😀\xF0\x9F"
       "abc\xE4"},
  };
  uint32_t seed = 1;
  for (const auto& [opts, text] : cases) expect_chunking_invariant(opts, text, 200, seed++);
}

TEST(ResponseParser, RandomTextsAreChunkingInvariant) {
  const std::vector<std::string> pieces = {"<｜DSML｜",
                                           "</｜DSML｜",
                                           " calls>",
                                           " invoke name=\"",
                                           " parameter name=\"",
                                           "\">",
                                           "\" string=\"true\">",
                                           "\" string=\"false\">",
                                           " parameter>",
                                           " invoke>",
                                           "tool_calls>",
                                           "</think>",
                                           "<think>",
                                           "\n",
                                           "\n\n",
                                           "a",
                                           "xyz",
                                           "STOP",
                                           "ST",
                                           "{\"k\": 1}",
                                           "é",
                                           "\"",
                                           "中",
                                           "\xE4",
                                           " "};
  std::mt19937 rng(42);
  for (int t = 0; t < 400; ++t) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    const ParserOptions opts{(rng() & 1) != 0, (rng() & 1) ? std::vector<std::string>{"STOP"}
                                                           : std::vector<std::string>{}};
    expect_chunking_invariant(opts, text, 10, static_cast<uint32_t>(t));
  }
}

}  // namespace
}  // namespace di::recipe::testing
