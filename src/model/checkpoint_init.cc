#include "model/checkpoint_init.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/checkpoint_layout.h"
#include "model/engram/layout.h"
#include "model/engram/token_map.h"
#include "model/weights/safetensors_writer.h"
#include "tensor/numeric.h"
#include "util/thread_pool.h"

namespace di::model {
namespace {

namespace fs = std::filesystem;
using weights::DType;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Uniform in [-1, 1) for element i of a stream.
struct Stream {
  uint64_t key;
  float operator()(int64_t i) const {
    uint64_t r = splitmix64(key ^ splitmix64(static_cast<uint64_t>(i)));
    return static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0);
  }
};

// Values with standard deviation `std` (uniform: half-width std * sqrt(3)).
float draw(const Stream& s, int64_t i, float std) {
  return s(i) * std * 1.7320508f;
}

uint8_t e8m0_of(float pow2) {
  int e;
  std::frexp(pow2, &e);
  return static_cast<uint8_t>(e - 1 + 127);
}

void add_fp8_matrix(weights::SafetensorsWriter& w,
                    ThreadPool* pool,
                    const std::string& prefix,
                    int64_t out,
                    int64_t in,
                    const Stream& s,
                    float std) {
  const int64_t rb = (out + 31) / 32, cb = (in + 31) / 32;
  auto scales = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rb * cb));
  w.add(prefix + ".weight", DType::kF8E4M3, {out, in}, [=](uint8_t* dst, size_t) {
    // Every value is a function of its index alone, so row blocks fill in parallel.
    pool->parallel_for(rb, 1, [&](int64_t b_begin, int64_t b_end) {
      std::vector<float> rows(static_cast<size_t>(32 * in));
      for (int64_t b = b_begin; b < b_end; ++b) {
        const int64_t r0 = b * 32, nr = std::min<int64_t>(32, out - r0);
        for (int64_t i = 0; i < nr * in; ++i)
          rows[static_cast<size_t>(i)] = draw(s, r0 * in + i, std);
        for (int64_t c = 0; c < cb; ++c) {
          float amax = 1e-12f;
          for (int64_t r = 0; r < nr; ++r)
            for (int64_t k = c * 32; k < std::min(in, c * 32 + 32); ++k)
              amax = std::max(amax, std::fabs(rows[static_cast<size_t>(r * in + k)]));
          const float scale = pow2_ceil_scale(amax / kFp8Max);
          (*scales)[static_cast<size_t>(b * cb + c)] = e8m0_of(scale);
          for (int64_t r = 0; r < nr; ++r)
            for (int64_t k = c * 32; k < std::min(in, c * 32 + 32); ++k)
              dst[(r0 + r) * in + k] = float_to_e4m3(rows[static_cast<size_t>(r * in + k)] / scale);
        }
      }
    });
  });
  w.add(prefix + ".scale", DType::kF8E8M0, {rb, cb},
        [scales](uint8_t* dst, size_t n) { std::memcpy(dst, scales->data(), n); });
}

// Row-wise blocks of 32 (FP4 experts; Engram tables in FP8).
void add_rowblock_matrix(weights::SafetensorsWriter& w,
                         ThreadPool* pool,
                         const std::string& prefix,
                         int64_t out,
                         int64_t in,
                         const Stream& s,
                         float std,
                         bool fp4) {
  const int64_t cb = in / 32;
  auto scales = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out * cb));
  const std::string wname = prefix + (fp4 ? ".weight" : ".weight");
  w.add(wname, fp4 ? DType::kI8 : DType::kF8E4M3, {out, fp4 ? in / 2 : in},
        [=](uint8_t* dst, size_t) {
          pool->parallel_for(out, 16, [&](int64_t r_begin, int64_t r_end) {
            float v[32];
            for (int64_t r = r_begin; r < r_end; ++r) {
              for (int64_t c = 0; c < cb; ++c) {
                float amax = 1e-12f;
                for (int i = 0; i < 32; ++i) {
                  v[i] = draw(s, r * in + c * 32 + i, std);
                  amax = std::max(amax, std::fabs(v[i]));
                }
                const float scale = pow2_ceil_scale(amax / (fp4 ? kFp4Max : kFp8Max));
                (*scales)[static_cast<size_t>(r * cb + c)] = e8m0_of(scale);
                for (int i = 0; i < 32; ++i) {
                  if (fp4) {
                    const int64_t k = c * 32 + i;
                    uint8_t code = float_to_e2m1(std::clamp(v[i] / scale, -kFp4Max, kFp4Max));
                    uint8_t& byte = dst[r * (in / 2) + k / 2];
                    byte = (k & 1) ? static_cast<uint8_t>((byte & 0x0f) | (code << 4)) : code;
                  } else {
                    dst[r * in + c * 32 + i] = float_to_e4m3(v[i] / scale);
                  }
                }
              }
            }
          });
        });
  w.add(prefix + ".scale", DType::kF8E8M0, {out, cb},
        [scales](uint8_t* dst, size_t n) { std::memcpy(dst, scales->data(), n); });
}

void add_tensor(weights::SafetensorsWriter& w,
                ThreadPool* pool,
                const TensorSpec& t,
                uint64_t seed) {
  const Stream s{splitmix64(seed ^ name_hash(t.name))};
  const int64_t n = num_parameters(t);
  const int64_t in = t.shape.size() > 1 ? t.shape[1] : t.shape[0];
  const float std = 1.0f / std::sqrt(static_cast<float>(in));
  switch (t.kind) {
    case TensorKind::kFp8Matrix:
      add_fp8_matrix(w, pool, t.name, t.shape[0], t.shape[1], s, std);
      break;
    case TensorKind::kFp4Matrix:
      add_rowblock_matrix(w, pool, t.name, t.shape[0], t.shape[1], s, std, true);
      break;
    case TensorKind::kEngramTable:
      add_rowblock_matrix(w, pool, t.name, t.shape[0], t.shape[1], s, 0.5f, false);
      break;
    case TensorKind::kBf16Matrix:
    case TensorKind::kNormWeight: {
      const bool norm = t.kind == TensorKind::kNormWeight;
      const bool embed = t.name == "embed" || t.name.find("markov_head.embed") != std::string::npos;
      const float sd = embed ? 1.0f : std;
      w.add(norm ? t.name : t.name + ".weight", DType::kBF16, t.shape, [=](uint8_t* dst, size_t) {
        pool->parallel_for(n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const float v = norm ? 1.0f + 0.1f * s(i) : draw(s, i, sd);
            const uint16_t h = float_to_bf16(v);
            std::memcpy(dst + 2 * i, &h, 2);
          }
        });
      });
      break;
    }
    case TensorKind::kF32Vector: {
      const bool scale = t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, "_scale") == 0;
      const bool fn = t.name.size() > 3 && t.name.compare(t.name.size() - 3, 3, "_fn") == 0;
      w.add(t.name, DType::kF32, t.shape, [=](uint8_t* dst, size_t) {
        for (int64_t i = 0; i < n; ++i) {
          const float v = scale ? 0.5f + 0.25f * s(i) : fn ? draw(s, i, std) : 0.5f * s(i);
          std::memcpy(dst + 4 * i, &v, 4);
        }
      });
      break;
    }
  }
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return Status(StatusCode::kUnavailable, "cannot write " + path.string());
  return Status();
}

}  // namespace

std::string synthetic_tokenizer_json(int vocab_size) {
  // Built as text: nlohmann's ordered_json inserts in linear time, quadratic for a full vocabulary.
  std::string vocab =
      "{\"<｜begin▁of▁sentence｜>\": 0, \"<｜end▁of▁sentence｜>\": 1, \"<｜▁pad▁｜>\": 2";
  static const char* kCase[] = {"w", "W", " w", " W"};
  for (int id = 3; id < vocab_size; ++id) {
    // Four spellings per word: lower/upper case, with and without a leading space.
    vocab +=
        ", \"" + std::string(kCase[id % 4]) + std::to_string(id / 4) + "\": " + std::to_string(id);
  }
  vocab += "}";
  return "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [], "
         "\"normalizer\": null, \"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": "
         "null, "
         "\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"<｜▁pad▁｜>\", \"vocab\": " +
         vocab + "}}\n";
}

Expected<ModelConfig> write_random_checkpoint(ModelConfig c, const InitOptions& o) {
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec)
    return Status(StatusCode::kUnavailable, "cannot create " + o.out_dir + ": " + ec.message());
  const fs::path dir(o.out_dir);
  if (o.tokenizer_path.empty()) {
    DI_RETURN_IF_ERROR(write_text(dir / "tokenizer.json", synthetic_tokenizer_json(c.vocab_size)));
  } else {
    fs::copy_file(o.tokenizer_path, dir / "tokenizer.json", fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return invalid_argument("--tokenizer " + o.tokenizer_path + ": " + ec.message());
  }
  if (!c.engram_layer_ids.empty()) {
    DI_ASSIGN_OR_RETURN(
        auto map, engram::build_compressed_token_map_from_file((dir / "tokenizer.json").string()));
    c.engram_compressed_vocab_size = map.num_classes;
    engram::EngramLayoutConfig lc{{c.engram_layer_ids.begin(), c.engram_layer_ids.end()},
                                  c.engram_max_ngram_size,
                                  c.engram_n_heads,
                                  c.engram_vocab_size};
    DI_ASSIGN_OR_RETURN(auto layout, engram::EngramLayout::from_config(lc));
    c.engram_num_embeddings = layout.table_rows;
  }
  DI_RETURN_IF_ERROR(validate_config(c));
  weights::SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("generator", "deepinfer init-model seed=" + std::to_string(o.seed));
  ThreadPool pool;  // the fills run while `writer.write` does, below
  for (const TensorSpec& t : checkpoint_tensor_specs(c)) add_tensor(writer, &pool, t, o.seed);
  DI_RETURN_IF_ERROR(writer.write((dir / "model.safetensors").string()));
  DI_RETURN_IF_ERROR(write_text(dir / "config.json", model_config_to_json(c)));
  return c;
}

}  // namespace di::model
