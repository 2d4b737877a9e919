#include "model/checkpoint_layout.h"

namespace di::model {

namespace {

void add_layer(const ModelConfig& c, int layer, std::vector<TensorSpec>& out) {
  const bool mtp = layer >= c.n_layers;
  const std::string p = mtp ? "mtp." + std::to_string(layer - c.n_layers) + "."
                            : "layers." + std::to_string(layer) + ".";
  const int64_t dim = c.dim, hd = c.head_dim, H = c.n_heads, inter = c.moe_inter_dim;
  const int64_t mix = int64_t{2 + c.hc_mult} * c.hc_mult, hc_dim = int64_t{c.hc_mult} * dim;
  const std::string a = p + "attn.";
  out.push_back({a + "wq_a", TensorKind::kFp8Matrix, {c.q_lora_rank, dim}});
  out.push_back({a + "q_norm.weight", TensorKind::kNormWeight, {c.q_lora_rank}});
  out.push_back({a + "wq_b", TensorKind::kFp8Matrix, {H * hd, c.q_lora_rank}});
  out.push_back({a + "wkv", TensorKind::kFp8Matrix, {hd, dim}});
  out.push_back({a + "kv_norm.weight", TensorKind::kNormWeight, {hd}});
  out.push_back({a + "attn_sink", TensorKind::kF32Vector, {H}});
  out.push_back({a + "wo_a",
                 TensorKind::kFp8Matrix,
                 {int64_t{c.o_groups} * c.o_lora_rank, H * hd / c.o_groups}});
  out.push_back({a + "wo_b", TensorKind::kFp8Matrix, {dim, int64_t{c.o_groups} * c.o_lora_rank}});
  if (c.is_kv_source(layer)) {
    out.push_back({a + "compressor.wkv", TensorKind::kBf16Matrix, {hd, dim}});
    if (c.compress_ratios[layer] > 1)
      out.push_back({a + "compressor.wgate", TensorKind::kBf16Matrix, {hd, dim}});
    out.push_back({a + "compressor.norm.weight", TensorKind::kNormWeight, {hd}});
    out.push_back({a + "indexer.wk", TensorKind::kBf16Matrix, {c.index_head_dim, hd}});
    out.push_back({a + "indexer.k_norm.weight", TensorKind::kNormWeight, {c.index_head_dim}});
  }
  if (c.is_index_source(layer)) {
    out.push_back({a + "indexer.wq_b",
                   TensorKind::kFp8Matrix,
                   {int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank}});
    out.push_back({a + "indexer.weights_proj", TensorKind::kBf16Matrix, {c.index_n_heads, dim}});
  }
  const std::string f = p + "ffn.";
  const int n_exp = c.routed_experts_of(layer);
  out.push_back({f + "gate", TensorKind::kBf16Matrix, {n_exp, dim}});
  out.push_back({f + "gate.bias", TensorKind::kF32Vector, {n_exp}});
  const TensorKind expert =
      c.expert_dtype == "fp4" ? TensorKind::kFp4Matrix : TensorKind::kFp8Matrix;
  for (int e = 0; e < n_exp; ++e) {
    const std::string ep = f + "experts." + std::to_string(e) + ".";
    out.push_back({ep + "w1", expert, {inter, dim}});
    out.push_back({ep + "w2", expert, {dim, inter}});
    out.push_back({ep + "w3", expert, {inter, dim}});
  }
  out.push_back({f + "shared_experts.w1", TensorKind::kFp8Matrix, {inter, dim}});
  out.push_back({f + "shared_experts.w2", TensorKind::kFp8Matrix, {dim, inter}});
  out.push_back({f + "shared_experts.w3", TensorKind::kFp8Matrix, {inter, dim}});
  out.push_back({p + "attn_norm.weight", TensorKind::kNormWeight, {dim}});
  out.push_back({p + "ffn_norm.weight", TensorKind::kNormWeight, {dim}});
  for (const char* site : {"attn", "ffn"}) {
    out.push_back({p + "hc_" + site + "_fn", TensorKind::kF32Vector, {mix, hc_dim}});
    out.push_back({p + "hc_" + site + "_base", TensorKind::kF32Vector, {mix}});
    out.push_back({p + "hc_" + site + "_scale", TensorKind::kF32Vector, {3}});
  }
  const int e = mtp ? -1 : c.engram_index(layer);
  if (e >= 0) {
    const int64_t cols =
        int64_t{c.engram_max_ngram_size - 1} * c.engram_n_heads * c.engram_head_dim;
    out.push_back({p + "engram.embed",
                   TensorKind::kEngramTable,
                   {c.engram_num_embeddings[static_cast<size_t>(e)], c.engram_head_dim}});
    out.push_back({p + "engram.wkv", TensorKind::kFp8Matrix, {int64_t{c.hc_mult + 1} * dim, cols}});
    out.push_back({p + "engram.q_weight", TensorKind::kNormWeight, {c.hc_mult, dim}});
    out.push_back({p + "engram.k_weight", TensorKind::kNormWeight, {c.hc_mult, dim}});
  }
}

}  // namespace

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  out.push_back({"embed", TensorKind::kBf16Matrix, {c.vocab_size, c.dim}});
  out.push_back({"head", TensorKind::kBf16Matrix, {c.vocab_size, c.dim}});
  out.push_back({"norm.weight", TensorKind::kNormWeight, {c.dim}});
  const int layers = c.has_dspark() ? c.num_total_layers() : c.n_layers;
  for (int l = 0; l < layers; ++l) add_layer(c, l, out);
  if (c.has_dspark()) {
    const std::string last = "mtp." + std::to_string(c.n_mtp_layers - 1) + ".";
    const int64_t nt = static_cast<int64_t>(c.dspark_target_layer_ids.size());
    out.push_back({"mtp.0.main_proj", TensorKind::kFp8Matrix, {c.dim, c.dim * nt}});
    out.push_back({"mtp.0.main_norm.weight", TensorKind::kNormWeight, {c.dim}});
    out.push_back({last + "norm.weight", TensorKind::kNormWeight, {c.dim}});
    out.push_back({last + "markov_head.embed",
                   TensorKind::kBf16Matrix,
                   {c.vocab_size, c.dspark_markov_rank}});
    out.push_back(
        {last + "markov_head.head", TensorKind::kBf16Matrix, {c.vocab_size, c.dspark_markov_rank}});
    out.push_back({last + "confidence_head.proj",
                   TensorKind::kBf16Matrix,
                   {1, c.dim + c.dspark_markov_rank}});
  }
  return out;
}

int64_t num_parameters(const TensorSpec& s) {
  int64_t n = 1;
  for (int64_t d : s.shape) n *= d;
  return n;
}

int64_t stored_bytes(const TensorSpec& s) {
  const int64_t n = num_parameters(s);
  switch (s.kind) {
    case TensorKind::kFp8Matrix:
      return n + ((s.shape[0] + 31) / 32) * ((s.shape[1] + 31) / 32);
    case TensorKind::kFp4Matrix:
      return n / 2 + n / 32;
    case TensorKind::kBf16Matrix:
    case TensorKind::kNormWeight:
      return 2 * n;
    case TensorKind::kF32Vector:
      return 4 * n;
    case TensorKind::kEngramTable:
      return n + n / 32;
  }
  return n;
}

}  // namespace di::model
