// Checkpoint loading: Hugging Face tensor names, errors that name the file and tensor, and
// init-model's random checkpoints (deterministic, loadable, every layer mode).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "backend/cpu/cpu_ops.h"
#include "model/checkpoint_init.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/tensor_names.h"
#include "model/weights/safetensors_file.h"
#include "model/weights/safetensors_writer.h"
#include "tensor/numeric.h"

namespace di::model {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = std::string(DI_SHARED_DIR) + "/golden/v41-mini/checkpoint";

fs::path temp_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("di_ckpt_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Rewrites the golden checkpoint with every tensor renamed by `rename` (or dropped when it
// returns ""), into `dir`.
void rewrite_checkpoint(const fs::path& dir,
                        const std::function<std::string(const std::string&)>& rename) {
  auto file = weights::SafetensorsFile::open(kGolden + "/model.safetensors").value();
  weights::SafetensorsWriter w;
  for (const auto& t : file.tensors()) {
    std::string name = rename(t.name);
    if (name.empty()) continue;
    w.add_bytes(name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  ASSERT_TRUE(w.write((dir / "model.safetensors").string()).ok());
  fs::copy_file(kGolden + "/config.json", dir / "config.json");
  fs::copy_file(kGolden + "/tokenizer.json", dir / "tokenizer.json");
}

std::vector<float> prompt_logits(Model& m, const std::vector<int32_t>& prompt) {
  auto pool = StatePool::create(m.config(), {1, 256, 16}, m.ops()).value();
  auto seq = pool.create_sequence().value();
  ForwardContext ctx;
  ctx.pool = &pool;
  ctx.chunks.push_back({&seq, prompt});
  std::vector<float> logits;
  EXPECT_TRUE(m.forward(ctx, {static_cast<int64_t>(prompt.size()) - 1}, logits).ok());
  return logits;
}

class CheckpointTest : public ::testing::Test {
 protected:
  ThreadPool threads_{2};
  backend::CpuOps ops_{threads_};
};

TEST_F(CheckpointTest, HuggingFaceNamesLoadTheSameModel) {
  EXPECT_EQ(hf_tensor_alias("layers.3.attn.wq_a.weight"),
            "model.layers.3.self_attn.q_a_proj.weight");
  EXPECT_EQ(hf_tensor_alias("layers.3.attn.wq_a.scale"),
            "model.layers.3.self_attn.q_a_proj.weight_scale_inv");
  EXPECT_EQ(hf_tensor_alias("layers.1.ffn.experts.7.w2.weight"),
            "model.layers.1.mlp.experts.7.down_proj.weight");
  EXPECT_EQ(hf_tensor_alias("layers.0.hc_attn_scale"), "model.layers.0.attn_hc.scale");
  auto dir = temp_dir("hf");
  rewrite_checkpoint(dir, [](const std::string& n) {
    std::string a = hf_tensor_alias(n);
    return a.empty() ? n : a;
  });
  auto official = Model::load(kGolden, ops_);
  auto hf = Model::load(dir.string(), ops_);
  ASSERT_TRUE(official.has_value()) << official.status().to_string();
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 11, 9, 77};
  auto a = prompt_logits(**official, prompt), b = prompt_logits(**hf, prompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, VisionWeightsAreLoadedAroundForTextOnlyUse) {
  auto dir = temp_dir("vision");
  rewrite_checkpoint(dir, [](const std::string& n) { return n; });
  {
    // Append vision tower tensors to the checkpoint as a second shard-less file set.
    weights::SafetensorsWriter w;
    w.add_bytes("vision.blocks.0.attn.qkv.weight", weights::DType::kBF16, {96, 32},
                std::vector<uint8_t>(96 * 32 * 2, 0));
    w.add_bytes("aligner.fc1.weight", weights::DType::kBF16, {128, 96},
                std::vector<uint8_t>(128 * 96 * 2, 0));
    ASSERT_TRUE(w.write((dir / "model-vision.safetensors").string()).ok());
    fs::rename(dir / "model.safetensors", dir / "model-text.safetensors");
  }
  auto m = Model::load(dir.string(), ops_);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto official = Model::load(kGolden, ops_);
  const std::vector<int32_t> prompt = {5, 17, 300};
  auto a = prompt_logits(**official, prompt), b = prompt_logits(**m, prompt);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  fs::remove_all(dir);
}

// The golden checkpoint with every FP8/FP4 matrix dequantized to BF16 (exact) and config dtype
// "bf16": the reference then runs plain bf16 products without activation quantization.
TEST_F(CheckpointTest, Bf16CheckpointLoadsAndStaysCloseToFp8) {
  auto dir = temp_dir("bf16");
  auto file = weights::SafetensorsFile::open(kGolden + "/model.safetensors").value();
  weights::SafetensorsWriter w;
  for (const auto& t : file.tensors()) {
    const std::string& n = t.name;
    if (n.size() > 6 && n.compare(n.size() - 6, 6, ".scale") == 0 &&
        n.find("hc_") == std::string::npos)
      continue;
    const std::string base = n.size() > 7 ? n.substr(0, n.size() - 7) : n;  // strip ".weight"
    const auto* scale = file.find(base + ".scale");
    const bool engram_table = n.find("engram.embed") != std::string::npos;
    if (!scale || engram_table) {
      if (engram_table)
        w.add_bytes(base + ".scale", scale->dtype, scale->shape,
                    std::vector<uint8_t>(scale->data, scale->data + scale->num_bytes));
      w.add_bytes(n, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.num_bytes));
      continue;
    }
    const bool fp4 = t.dtype == weights::DType::kI8;
    const int64_t out = t.shape[0], in = fp4 ? t.shape[1] * 2 : t.shape[1];
    std::vector<uint8_t> bytes(static_cast<size_t>(out * in * 2));
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        float v;
        if (fp4) {
          uint8_t b = t.data[o * (in / 2) + i / 2];
          v = e2m1_to_float((i & 1) ? (b >> 4) : (b & 0xf)) *
              e8m0_to_float(scale->data[o * (in / 32) + i / 32]);
        } else {
          v = e4m3_to_float(t.data[o * in + i]) *
              e8m0_to_float(scale->data[(o / 32) * ((in + 31) / 32) + i / 32]);
        }
        uint16_t h = float_to_bf16(v);
        std::memcpy(&bytes[static_cast<size_t>(2 * (o * in + i))], &h, 2);
      }
    }
    w.add_bytes(n, weights::DType::kBF16, {out, in}, std::move(bytes));
  }
  ASSERT_TRUE(w.write((dir / "model.safetensors").string()).ok());
  fs::copy_file(kGolden + "/tokenizer.json", dir / "tokenizer.json");
  {
    std::ifstream in(kGolden + "/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    auto c = parse_model_config(ss.str()).value();
    c.dtype = "bf16";
    c.expert_dtype = "";
    std::ofstream(dir / "config.json") << model_config_to_json(c);
  }
  auto bf16 = Model::load(dir.string(), ops_);
  ASSERT_TRUE(bf16.has_value()) << bf16.status().to_string();
  auto fp8 = Model::load(kGolden, ops_);
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 11, 9, 77, 400, 12, 13};
  auto a = prompt_logits(**fp8, prompt), b = prompt_logits(**bf16, prompt);
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    diff += std::fabs(a[i] - b[i]);
    mag += std::fabs(a[i]);
  }
  // Same weights, no activation quantization: close, but not the same function.
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff / mag, 0.5);
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, MissingTensorIsAnErrorNamingIt) {
  auto dir = temp_dir("missing");
  rewrite_checkpoint(
      dir, [](const std::string& n) { return n == "layers.4.attn.indexer.wk.weight" ? "" : n; });
  auto m = Model::load(dir.string(), ops_);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("layers.4.attn.indexer.wk.weight"), std::string::npos);
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, WrongShapeOrDtypeNamesFileAndTensor) {
  auto dir = temp_dir("shape");
  {
    auto file = weights::SafetensorsFile::open(kGolden + "/model.safetensors").value();
    weights::SafetensorsWriter w;
    for (const auto& t : file.tensors()) {
      auto shape = t.shape;
      auto dtype = t.dtype;
      if (t.name == "layers.2.attn.kv_norm.weight") dtype = weights::DType::kF32;  // BF16 expected
      if (t.name == "layers.2.attn.kv_norm.weight") shape = {32};
      size_t bytes = t.name == "layers.2.attn.kv_norm.weight" ? 128 : t.num_bytes;
      w.add_bytes(t.name, dtype, shape, std::vector<uint8_t>(bytes, 0));
    }
    Status s = w.write((dir / "model.safetensors").string());
    ASSERT_TRUE(s.ok()) << s.to_string();
    fs::copy_file(kGolden + "/config.json", dir / "config.json");
    fs::copy_file(kGolden + "/tokenizer.json", dir / "tokenizer.json");
  }
  auto m = Model::load(dir.string(), ops_);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("layers.2.attn.kv_norm.weight"), std::string::npos)
      << m.status().to_string();
  EXPECT_NE(m.status().message().find("model.safetensors"), std::string::npos)
      << m.status().to_string();
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, TruncatedFileIsAnError) {
  auto dir = temp_dir("trunc");
  fs::copy_file(kGolden + "/config.json", dir / "config.json");
  fs::copy_file(kGolden + "/tokenizer.json", dir / "tokenizer.json");
  fs::copy_file(kGolden + "/model.safetensors", dir / "model.safetensors");
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") / 2);
  auto m = Model::load(dir.string(), ops_);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("model.safetensors"), std::string::npos)
      << m.status().to_string();
  fs::remove_all(dir);
}

TEST_F(CheckpointTest, InitModelIsDeterministicAndLoads) {
  auto config = preset_config("mini", {}).value();
  auto a = temp_dir("init_a"), b = temp_dir("init_b"), c = temp_dir("init_c");
  ASSERT_TRUE(write_random_checkpoint(config, {a.string(), 7, ""}).has_value());
  ASSERT_TRUE(write_random_checkpoint(config, {b.string(), 7, ""}).has_value());
  ASSERT_TRUE(write_random_checkpoint(config, {c.string(), 8, ""}).has_value());
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p / "model.safetensors", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(a), bytes(b));
  EXPECT_NE(bytes(a), bytes(c));
  auto m = Model::load(a.string(), ops_);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  const auto& cfg = (*m)->config();
  EXPECT_EQ(cfg.vocab_size, 129280);
  for (LayerMode mode :
       {LayerMode::kSwa, LayerMode::kFull, LayerMode::kReuse, LayerMode::kReindex}) {
    bool found = false;
    for (int l = 0; l < cfg.n_layers; ++l) found = found || cfg.layer_mode(l) == mode;
    EXPECT_TRUE(found) << layer_mode_name(mode);
  }
  auto logits = prompt_logits(**m, {1000, 2000, 3000, 128000, 5});
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  for (auto& d : {a, b, c}) fs::remove_all(d);
}

}  // namespace
}  // namespace di::model
