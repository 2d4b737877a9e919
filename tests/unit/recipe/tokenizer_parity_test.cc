// Parity with the native HuggingFace tokenizers library (npm `tokenizers`, the oracle) on the
// DeepSeek V3 tokenizer.json: zero id mismatches over a large generated corpus, both with added
// tokens matched (kAll = HF default) and not (kNone = HF with an empty added_tokens list), plus
// decode parity on arbitrary id sequences. Node and node_modules are required (scripts/setup.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "node_oracle.h"
#include "parity_corpus.h"
#include "recipe/tokenizer/char_class.h"
#include "recipe/tokenizer/tokenizer.h"
#include "recipe/tokenizer/utf8.h"

namespace di::recipe::testing {
namespace {

using Json = nlohmann::json;

std::string base64(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// One oracle input line: a JSON string, or {"b64": ...} for bytes that are not valid UTF-8.
std::string oracle_line(const std::string& text) {
  if (!is_valid_utf8(text)) return Json{{"b64", base64(text)}}.dump();
  return Json(text).dump();
}

std::string ids_str(const std::vector<int32_t>& ids) {
  return Json(ids).dump();
}

class TokenizerParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const Status avail = check_oracle_available();
    if (!avail.ok()) return;
    auto tok = Tokenizer::from_file(v3_tokenizer_path());
    if (tok) tok_ = new Tokenizer(std::move(tok).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    const Status avail = check_oracle_available();
    ASSERT_TRUE(avail.ok()) << avail.to_string();
    ASSERT_NE(tok_, nullptr) << "failed to load " << v3_tokenizer_path();
  }

  // Encodes every corpus item (in parallel on 2 threads) and compares with the oracle.
  void check_encode(const std::vector<CorpusItem>& corpus, SpecialTokens allow) {
    std::vector<std::string> lines;
    size_t bytes = 0;
    for (const CorpusItem& c : corpus) {
      lines.push_back(oracle_line(c.text));
      bytes += c.text.size();
    }
    std::vector<std::vector<int32_t>> ours(corpus.size());
    const auto t0 = std::chrono::steady_clock::now();
    std::thread helper([&] {
      for (size_t i = 1; i < corpus.size(); i += 2) ours[i] = tok_->encode(corpus[i].text, allow);
    });
    for (size_t i = 0; i < corpus.size(); i += 2) ours[i] = tok_->encode(corpus[i].text, allow);
    helper.join();
    const double ours_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto t1 = std::chrono::steady_clock::now();
    auto oracle = run_oracle(v3_tokenizer_path(),
                             allow == SpecialTokens::kAll ? "encode" : "encode_plain", lines);
    ASSERT_TRUE(oracle.has_value()) << oracle.status().to_string();
    const double oracle_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    size_t mismatches = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
      const auto expected = Json::parse((*oracle)[i]).get<std::vector<int32_t>>();
      if (expected == ours[i]) continue;
      if (++mismatches > 5) continue;
      size_t pos = 0;
      while (pos < expected.size() && pos < ours[i].size() && expected[pos] == ours[i][pos]) ++pos;
      ADD_FAILURE() << "mismatch in item " << i << " (" << corpus[i].category
                    << ") input=" << lines[i] << "\n  first difference at id index " << pos
                    << "\n  oracle=" << ids_str(expected) << "\n  ours  =" << ids_str(ours[i]);
    }
    std::printf(
        "[parity] %zu items, %.2f MB, %zu mismatches (ours %.2f s on 2 threads, oracle "
        "%.2f s)\n",
        corpus.size(), bytes / 1e6, mismatches, ours_s, oracle_s);
    EXPECT_EQ(mismatches, 0u);
  }

  static Tokenizer* tok_;
};
Tokenizer* TokenizerParity::tok_ = nullptr;

TEST_F(TokenizerParity, EncodeMatchesOracleWithAddedTokens) {
  check_encode(make_parity_corpus(20240601), SpecialTokens::kAll);
}

TEST_F(TokenizerParity, EncodeMatchesOracleWithoutAddedTokens) {
  auto corpus = make_parity_corpus(77);
  std::vector<CorpusItem> subset;
  for (auto& c : corpus) {
    if (c.category != "code_point") subset.push_back(std::move(c));
  }
  check_encode(subset, SpecialTokens::kNone);
}

TEST_F(TokenizerParity, DecodeRoundTripsValidUtf8) {
  size_t checked = 0;
  for (const CorpusItem& c : make_parity_corpus(5)) {
    if (c.category == "invalid_utf8") {
      EXPECT_EQ(tok_->decode(tok_->encode(c.text)), utf8_lossy(c.text));
      continue;
    }
    const auto ids = tok_->encode(c.text, SpecialTokens::kAll);
    ASSERT_EQ(tok_->decode(ids), c.text) << oracle_line(c.text);
    ++checked;
  }
  EXPECT_GT(checked, 100000u);
}

TEST_F(TokenizerParity, DecodeOfArbitraryIdsMatchesOracle) {
  Rng rng(99);
  std::vector<std::vector<int32_t>> seqs;
  const int32_t n = tok_->vocab_size();
  for (int i = 0; i < 6000; ++i) {
    std::vector<int32_t> ids;
    for (size_t k = rng.below(24); k > 0; --k) {
      const uint64_t r = rng.below(10);
      if (r == 0) {
        ids.push_back(static_cast<int32_t>(rng.below(3)));  // BOS/EOS/pad
      } else if (r == 1) {
        ids.push_back(static_cast<int32_t>(128000 + rng.below(n - 128000 + 50)));  // added/unknown
      } else if (r < 5) {
        ids.push_back(static_cast<int32_t>(3 + rng.below(300)));  // byte tokens: split UTF-8
      } else {
        ids.push_back(static_cast<int32_t>(rng.below(128000)));
      }
    }
    seqs.push_back(ids);
  }
  std::vector<std::string> lines;
  for (const auto& s : seqs) lines.push_back(ids_str(s));
  for (const bool skip : {false, true}) {
    auto oracle = run_oracle(v3_tokenizer_path(), skip ? "decode_skip" : "decode", lines);
    ASSERT_TRUE(oracle.has_value()) << oracle.status().to_string();
    size_t mismatches = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::string expected = Json::parse((*oracle)[i]).get<std::string>();
      const std::string ours = tok_->decode(seqs[i], skip);
      if (expected == ours) continue;
      if (++mismatches <= 5) {
        ADD_FAILURE() << "decode mismatch (skip_special=" << skip << ") ids=" << lines[i]
                      << "\n  oracle=" << Json(expected).dump()
                      << "\n  ours  =" << Json(ours).dump();
      }
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

// Our \p{L} \p{M} \p{N} \p{P} \p{S} \s tables equal the oracle's for every code point.
TEST_F(TokenizerParity, CharClassesMatchOracleForEveryCodePoint) {
  const std::string out = temp_path("di_char_classes");
  const std::string cmd = "node '" + std::string(DI_SOURCE_DIR) +
                          "/tests/unit/recipe/char_class_oracle.js' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> oracle((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(out);
  ASSERT_EQ(oracle.size(), 0x110000u);
  const CharClassTable& table = CharClassTable::instance();
  size_t mismatches = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const unsigned want = static_cast<unsigned char>(oracle[cp]);
    const unsigned have = table.get(cp) & kUnicodeClassBits;
    if (want != have && ++mismatches <= 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp) << ": oracle classes 0x"
                    << want << ", ours 0x" << have << " (regenerate char_class_overrides.inc)";
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace di::recipe::testing
