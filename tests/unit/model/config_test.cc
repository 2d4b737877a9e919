#include "model/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace di::model {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kDir = std::string(DI_SHARED_DIR) + "/golden/v41-mini/checkpoint/";

TEST(Config, OfficialAndHuggingFaceFormatsAgree) {
  auto official = parse_model_config(read(kDir + "config.json"));
  ASSERT_TRUE(official.has_value()) << official.status().to_string();
  auto hf = parse_model_config(read(kDir + "config_hf.json"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  EXPECT_EQ(model_config_to_json(*official), model_config_to_json(*hf));
  EXPECT_EQ(official->dim, 128);
  EXPECT_EQ(official->layer_mode(0), LayerMode::kSwa);
  EXPECT_EQ(official->layer_mode(1), LayerMode::kFull);
  EXPECT_EQ(official->layer_mode(2), LayerMode::kReuse);
  EXPECT_EQ(official->layer_mode(6), LayerMode::kReindex);
  EXPECT_EQ(official->kv_source_of(7), 4);
  EXPECT_EQ(official->index_source_of(7), 6);
}

TEST(Config, RoundTripsThroughJson) {
  auto c = parse_model_config(read(kDir + "config.json"));
  ASSERT_TRUE(c.has_value());
  auto again = parse_model_config(model_config_to_json(*c));
  ASSERT_TRUE(again.has_value()) << again.status().to_string();
  EXPECT_EQ(model_config_to_json(*again), model_config_to_json(*c));
}

TEST(Config, FieldsOfTheWrongTypeAreErrorsNotAborts) {
  std::string text = read(kDir + "config_hf.json");
  const std::string bad_quant =
      text.substr(0, text.rfind('}')) + ", \"quantization_config\": {\"quant_method\": 5}}";
  auto c = parse_model_config(bad_quant);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  const std::string bad_vision =
      text.substr(0, text.rfind('}')) + ", \"vision_config\": {\"num_hidden_layers\": \"x\"}}";
  EXPECT_FALSE(parse_model_config(bad_vision).has_value());
}

TEST(Config, RejectsUnknownAndInconsistentFields) {
  std::string text = read(kDir + "config.json");
  auto typo = parse_model_config(text.substr(0, text.rfind('}')) + ", \"n_layerz\": 3}");
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.status().message().find("n_layerz"), std::string::npos);

  auto c = parse_model_config(text).value();
  c.compress_ratios.pop_back();
  Status s = validate_config(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("compress_ratios"), std::string::npos);

  c = parse_model_config(text).value();
  c.kv_source_layers = {0};
  EXPECT_NE(validate_config(c).message().find("kv_source_layers"), std::string::npos);

  c = parse_model_config(text).value();
  c.n_heads = 3;
  EXPECT_FALSE(validate_config(c).ok());

  c = parse_model_config(text).value();
  c.n_routed_experts = 5000;  // beyond the router's per-token scratch: refused, not a crash
  EXPECT_NE(validate_config(c).message().find("n_routed_experts"), std::string::npos);

  c = parse_model_config(text).value();
  c.hc_mult = 16;
  EXPECT_FALSE(validate_config(c).ok());

  EXPECT_FALSE(parse_model_config("[1, 2]").has_value());
  EXPECT_FALSE(parse_model_config("{\"dim\": \"wide\"}").has_value());
}

}  // namespace
}  // namespace di::model
