#include "model/model_weights.h"

#include <cstdint>
#include <cstring>

#include "model/tensor_names.h"
#include "tensor/numeric.h"

namespace di::model {
namespace {

using weights::DType;
using weights::TensorInfo;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Looks tensors up by name and checks them; every error names the file and the tensor.
class Binder {
 public:
  Binder(const weights::Checkpoint& ckpt,
         std::vector<std::shared_ptr<std::vector<uint8_t>>>& copies,
         bool bf16_checkpoint)
      : ckpt_(ckpt), copies_(copies), bf16_checkpoint_(bf16_checkpoint) {}

  // The tensor under its official name, else under its Hugging Face alias.
  const TensorInfo* find(const std::string& name) const {
    if (const TensorInfo* t = ckpt_.find(name)) return t;
    const std::string alias = hf_tensor_alias(name);
    return alias.empty() ? nullptr : ckpt_.find(alias);
  }

  Expected<const TensorInfo*> get(const std::string& name,
                                  DType dtype,
                                  const std::vector<int64_t>& shape) const {
    const TensorInfo* t = find(name);
    if (!t) return not_found("checkpoint has no tensor '" + name + "'");
    if (t->dtype != dtype) {
      return invalid_argument(t->file + ": tensor '" + name + "' has dtype " +
                              std::string(weights::dtype_name(t->dtype)) + ", expected " +
                              std::string(weights::dtype_name(dtype)));
    }
    if (t->shape != shape) {
      return invalid_argument(t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) +
                              ", expected " + shape_str(shape));
    }
    return t;
  }

  // FP8 [out, in] + .scale [ceil(out/32), ceil(in/32)], FP4 (I8 [out, in/2] + .scale [out, in/32])
  // or BF16 [out, in], chosen by the stored dtype of `prefix.weight`.
  Expected<WeightView> matrix(const std::string& prefix, int64_t out, int64_t in) const {
    const std::string wname = prefix + ".weight";
    const TensorInfo* t = find(wname);
    if (!t) return not_found("checkpoint has no tensor '" + wname + "'");
    WeightView v;
    v.out_features = out;
    v.in_features = in;
    if (t->dtype == DType::kF8E4M3) {
      DI_ASSIGN_OR_RETURN(const TensorInfo* w, get(wname, DType::kF8E4M3, {out, in}));
      DI_ASSIGN_OR_RETURN(const TensorInfo* s, get(prefix + ".scale", DType::kF8E8M0,
                                                   {(out + 31) / 32, (in + 31) / 32}));
      v.format = WeightFormat::kFP8;
      v.data = w->data;
      v.scale = s->data;
    } else if (t->dtype == DType::kI8) {
      DI_ASSIGN_OR_RETURN(const TensorInfo* w, get(wname, DType::kI8, {out, in / 2}));
      DI_ASSIGN_OR_RETURN(const TensorInfo* s,
                          get(prefix + ".scale", DType::kF8E8M0, {out, in / 32}));
      v.format = WeightFormat::kFP4;
      v.data = w->data;
      v.scale = s->data;
    } else if (t->dtype == DType::kBF16) {
      DI_ASSIGN_OR_RETURN(const TensorInfo* w, get(wname, DType::kBF16, {out, in}));
      v.format = WeightFormat::kBF16;
      v.data = aligned(w, 2);
    } else if (t->dtype == DType::kF32) {
      DI_ASSIGN_OR_RETURN(const TensorInfo* w, get(wname, DType::kF32, {out, in}));
      v.format = WeightFormat::kF32;
      v.data = aligned(w, 4);
    } else {
      return invalid_argument(t->file + ": tensor '" + wname + "' has unsupported dtype " +
                              std::string(weights::dtype_name(t->dtype)));
    }
    return v;
  }

  Expected<WeightView> dense(const std::string& prefix, int64_t out, int64_t in) const {
    DI_ASSIGN_OR_RETURN(WeightView v, matrix(prefix, out, in));
    if (v.format != WeightFormat::kBF16 && v.format != WeightFormat::kF32) {
      return invalid_argument("tensor '" + prefix + ".weight' must be BF16 or F32");
    }
    return v;
  }

  Expected<WeightView> quantized(const std::string& prefix,
                                 int64_t out,
                                 int64_t in,
                                 WeightFormat format) const {
    DI_ASSIGN_OR_RETURN(WeightView v, matrix(prefix, out, in));
    // A bf16 checkpoint (config dtype "bf16") keeps these as BF16: the reference's linear() then
    // runs a plain bf16 product without activation quantization.
    if (bf16_checkpoint_ && v.format == WeightFormat::kBF16) return v;
    if (v.format != format) {
      return invalid_argument("tensor '" + prefix + ".weight' must be stored as " +
                              (format == WeightFormat::kFP8 ? "F8_E4M3" : "packed FP4 (I8)"));
    }
    return v;
  }

  // A 1-D or 2-D F32/BF16 tensor copied to f32.
  Expected<std::vector<float>> floats(const std::string& name,
                                      const std::vector<int64_t>& shape,
                                      DType dtype) const {
    DI_ASSIGN_OR_RETURN(const TensorInfo* t, get(name, dtype, shape));
    std::vector<float> out(static_cast<size_t>(t->num_elements()));
    for (size_t i = 0; i < out.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(&out[i], t->data + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        out[i] = bf16_to_float(h);
      }
    }
    return out;
  }

  bool has(const std::string& name) const { return find(name) != nullptr; }

 private:
  // Misaligned storage is copied once so that typed loads stay aligned.
  const uint8_t* aligned(const TensorInfo* t, size_t align) const {
    if (reinterpret_cast<uintptr_t>(t->data) % align == 0) return t->data;
    auto copy = std::make_shared<std::vector<uint8_t>>(t->data, t->data + t->num_bytes);
    copies_.push_back(copy);
    return copy->data();
  }

  const weights::Checkpoint& ckpt_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>>& copies_;
  bool bf16_checkpoint_ = false;
};

Status bind_attention(
    const Binder& b, const ModelConfig& c, int layer, const std::string& p, AttentionWeights& a) {
  const int64_t dim = c.dim, hd = c.head_dim, H = c.n_heads;
  DI_ASSIGN_OR_RETURN(a.wq_a, b.quantized(p + "wq_a", c.q_lora_rank, dim, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(a.q_norm, b.floats(p + "q_norm.weight", {c.q_lora_rank}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(a.wq_b, b.quantized(p + "wq_b", H * hd, c.q_lora_rank, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(a.wkv, b.quantized(p + "wkv", hd, dim, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(a.kv_norm, b.floats(p + "kv_norm.weight", {hd}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(a.attn_sink, b.floats(p + "attn_sink", {H}, DType::kF32));
  const int64_t wo_a_out = static_cast<int64_t>(c.o_groups) * c.o_lora_rank;
  const int64_t wo_a_in = H * hd / c.o_groups;
  DI_ASSIGN_OR_RETURN(WeightView wo_a, b.matrix(p + "wo_a", wo_a_out, wo_a_in));
  // The reference dequantizes wo_a to bf16 at load (exact: e4m3 times a power of two); kept as
  // bf16 bits, half the bytes a decode step streams of an fp32 copy, same products.
  a.wo_a.resize(static_cast<size_t>(wo_a_out * wo_a_in));
  for (int64_t o = 0; o < wo_a_out; ++o) {
    for (int64_t i = 0; i < wo_a_in; ++i) {
      float v;
      if (wo_a.format == WeightFormat::kFP8) {
        v = e4m3_to_float(wo_a.data[o * wo_a_in + i]) *
            e8m0_to_float(wo_a.scale[(o / 32) * ((wo_a_in + 31) / 32) + i / 32]);
      } else if (wo_a.format == WeightFormat::kBF16) {
        uint16_t h;
        std::memcpy(&h, wo_a.data + 2 * (o * wo_a_in + i), 2);
        v = bf16_to_float(h);
      } else {
        return invalid_argument("tensor '" + p + "wo_a.weight' must be F8_E4M3 or BF16");
      }
      a.wo_a[static_cast<size_t>(o * wo_a_in + i)] = float_to_bf16(round_bf16(v));
    }
  }
  DI_ASSIGN_OR_RETURN(a.wo_b, b.quantized(p + "wo_b", dim, wo_a_out, WeightFormat::kFP8));
  const int ratio = c.compress_ratios[layer];
  if (c.is_kv_source(layer)) {
    DI_ASSIGN_OR_RETURN(a.comp_wkv, b.dense(p + "compressor.wkv", hd, dim));
    if (ratio > 1) {
      DI_ASSIGN_OR_RETURN(a.comp_wgate, b.dense(p + "compressor.wgate", hd, dim));
    }
    DI_ASSIGN_OR_RETURN(a.comp_norm, b.floats(p + "compressor.norm.weight", {hd}, DType::kBF16));
    DI_ASSIGN_OR_RETURN(a.idx_wk, b.dense(p + "indexer.wk", c.index_head_dim, hd));
    DI_ASSIGN_OR_RETURN(a.idx_k_norm,
                        b.floats(p + "indexer.k_norm.weight", {c.index_head_dim}, DType::kBF16));
  }
  if (c.is_index_source(layer)) {
    DI_ASSIGN_OR_RETURN(a.idx_wq_b,
                        b.quantized(p + "indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim,
                                    c.q_lora_rank, WeightFormat::kFP8));
    DI_ASSIGN_OR_RETURN(a.idx_weights_proj,
                        b.dense(p + "indexer.weights_proj", c.index_n_heads, dim));
  }
  return Status();
}

Status bind_moe(
    const Binder& b, const ModelConfig& c, int layer, const std::string& p, MoeWeights& m) {
  const int64_t dim = c.dim, inter = c.moe_inter_dim;
  const int n = c.routed_experts_of(layer);
  DI_ASSIGN_OR_RETURN(m.gate, b.dense(p + "gate", n, dim));
  DI_ASSIGN_OR_RETURN(m.bias, b.floats(p + "gate.bias", {n}, DType::kF32));
  const WeightFormat expert_format = c.expert_dtype == "fp4"   ? WeightFormat::kFP4
                                     : c.expert_dtype == "fp8" ? WeightFormat::kFP8
                                                               : WeightFormat::kBF16;
  m.experts.resize(static_cast<size_t>(n));
  for (int e = 0; e < n; ++e) {
    const std::string ep = p + "experts." + std::to_string(e) + ".";
    auto& x = m.experts[static_cast<size_t>(e)];
    DI_ASSIGN_OR_RETURN(x.w1, b.quantized(ep + "w1", inter, dim, expert_format));
    DI_ASSIGN_OR_RETURN(x.w2, b.quantized(ep + "w2", dim, inter, expert_format));
    DI_ASSIGN_OR_RETURN(x.w3, b.quantized(ep + "w3", inter, dim, expert_format));
    m.experts_w1.push_back(x.w1);
    m.experts_w3.push_back(x.w3);
    m.experts_w2.push_back(x.w2);
  }
  const std::string sp = p + "shared_experts.";
  DI_ASSIGN_OR_RETURN(m.shared.w1, b.quantized(sp + "w1", inter, dim, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(m.shared.w2, b.quantized(sp + "w2", dim, inter, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(m.shared.w3, b.quantized(sp + "w3", inter, dim, WeightFormat::kFP8));
  return Status();
}

Status bind_engram(
    const Binder& b, const ModelConfig& c, int index, const std::string& p, EngramWeights& e) {
  const int64_t rows = c.engram_num_embeddings[static_cast<size_t>(index)];
  const int64_t hd = c.engram_head_dim;
  DI_ASSIGN_OR_RETURN(const TensorInfo* t, b.get(p + "embed.weight", DType::kF8E4M3, {rows, hd}));
  DI_ASSIGN_OR_RETURN(const TensorInfo* s,
                      b.get(p + "embed.scale", DType::kF8E8M0, {rows, hd / 32}));
  if (rows > INT32_MAX) {  // the backends index the table with int32 row ids
    return invalid_argument(p + "embed.weight: more than 2^31 - 1 rows");
  }
  e.table = t->data;
  e.table_scale = s->data;
  e.rows = rows;
  const int64_t cols = int64_t{c.engram_max_ngram_size - 1} * c.engram_n_heads * hd;
  DI_ASSIGN_OR_RETURN(
      e.wkv, b.quantized(p + "wkv", int64_t{c.hc_mult + 1} * c.dim, cols, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(auto q, b.floats(p + "q_weight", {c.hc_mult, c.dim}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(auto k, b.floats(p + "k_weight", {c.hc_mult, c.dim}, DType::kBF16));
  e.qk_weight.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) e.qk_weight[i] = q[i] * k[i];
  return Status();
}

Status bind_layer(const Binder& b, const ModelConfig& c, int layer, LayerWeights& w) {
  const bool mtp = layer >= c.n_layers;
  const std::string p = mtp ? "mtp." + std::to_string(layer - c.n_layers) + "."
                            : "layers." + std::to_string(layer) + ".";
  w.layer_id = layer;
  const int64_t mix = int64_t{2 + c.hc_mult} * c.hc_mult;
  const int64_t hc_dim = int64_t{c.hc_mult} * c.dim;
  DI_RETURN_IF_ERROR(bind_attention(b, c, layer, p + "attn.", w.attn));
  DI_RETURN_IF_ERROR(bind_moe(b, c, layer, p + "ffn.", w.ffn));
  DI_ASSIGN_OR_RETURN(w.attn_norm, b.floats(p + "attn_norm.weight", {c.dim}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(w.ffn_norm, b.floats(p + "ffn_norm.weight", {c.dim}, DType::kBF16));
  for (auto [site, hcw] : {std::pair{"attn", &w.hc_attn}, std::pair{"ffn", &w.hc_ffn}}) {
    const std::string hp = p + "hc_" + site + "_";
    DI_ASSIGN_OR_RETURN(hcw->fn, b.floats(hp + "fn", {mix, hc_dim}, DType::kF32));
    DI_ASSIGN_OR_RETURN(hcw->base, b.floats(hp + "base", {mix}, DType::kF32));
    DI_ASSIGN_OR_RETURN(hcw->scale, b.floats(hp + "scale", {3}, DType::kF32));
  }
  int engram_index = mtp ? -1 : c.engram_index(layer);
  if (engram_index >= 0) {
    w.engram.emplace();
    DI_RETURN_IF_ERROR(bind_engram(b, c, engram_index, p + "engram.", *w.engram));
  }
  return Status();
}

Status bind_dspark(const Binder& b, const ModelConfig& c, DsparkHeadWeights& d) {
  const std::string first = "mtp.0.";
  const std::string last = "mtp." + std::to_string(c.n_mtp_layers - 1) + ".";
  const int64_t n_targets = static_cast<int64_t>(c.dspark_target_layer_ids.size());
  DI_ASSIGN_OR_RETURN(
      d.main_proj, b.quantized(first + "main_proj", c.dim, c.dim * n_targets, WeightFormat::kFP8));
  DI_ASSIGN_OR_RETURN(d.main_norm, b.floats(first + "main_norm.weight", {c.dim}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(d.norm, b.floats(last + "norm.weight", {c.dim}, DType::kBF16));
  DI_ASSIGN_OR_RETURN(d.markov_embed,
                      b.dense(last + "markov_head.embed", c.vocab_size, c.dspark_markov_rank));
  DI_ASSIGN_OR_RETURN(d.markov_head,
                      b.dense(last + "markov_head.head", c.vocab_size, c.dspark_markov_rank));
  DI_ASSIGN_OR_RETURN(d.confidence_proj,
                      b.dense(last + "confidence_head.proj", 1, c.dim + c.dspark_markov_rank));
  return Status();
}

}  // namespace

Expected<ModelWeights> bind_model_weights(const ModelConfig& c, const weights::Checkpoint& ckpt) {
  ModelWeights w;
  Binder b(ckpt, w.aligned_copies, c.dtype == "bf16");
  DI_ASSIGN_OR_RETURN(w.embed, b.dense("embed", c.vocab_size, c.dim));
  DI_ASSIGN_OR_RETURN(w.head, b.dense("head", c.vocab_size, c.dim));
  DI_ASSIGN_OR_RETURN(w.norm, b.floats("norm.weight", {c.dim}, DType::kBF16));
  const int num_layers = c.has_dspark() ? c.num_total_layers() : c.n_layers;
  w.layers.resize(static_cast<size_t>(num_layers));
  for (int l = 0; l < num_layers; ++l) {
    DI_RETURN_IF_ERROR(bind_layer(b, c, l, w.layers[static_cast<size_t>(l)]));
  }
  if (c.has_dspark()) DI_RETURN_IF_ERROR(bind_dspark(b, c, w.dspark));
  return w;
}

}  // namespace di::model
