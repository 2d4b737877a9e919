#include "model/forward_flops.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

namespace di::model {

namespace {

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// The compress ratio of the layer a "layers.L.*" tensor belongs to (1 when there is none): the
// compressor's index keys are computed once per `ratio` positions.
int ratio_of(const ModelConfig& c, const std::string& name) {
  constexpr std::string_view kPrefix = "layers.";
  if (name.rfind(kPrefix, 0) != 0) return 1;
  int layer = -1;
  const char* begin = name.data() + kPrefix.size();
  const std::from_chars_result parsed = std::from_chars(begin, name.data() + name.size(), layer);
  if (parsed.ec != std::errc() || layer < 0 ||
      static_cast<size_t>(layer) >= c.compress_ratios.size()) {
    return 1;
  }
  return c.compress_ratios[static_cast<size_t>(layer)];
}

}  // namespace

bool read_by_target_step(const TensorSpec& t) {
  if (t.name == "embed" || t.kind == TensorKind::kEngramTable) return false;
  if (contains(t.name, "markov_head") || contains(t.name, "confidence_head")) return false;
  if (t.name.rfind("mtp.", 0) == 0) {
    return contains(t.name, "main_proj") || contains(t.name, "attn.wkv");
  }
  return true;
}

namespace {

// Products of one row (no head), and the head's, by rate.
struct RowProducts {
  ForwardFlops per_row, head;
};

RowProducts row_products(const ModelConfig& c) {
  RowProducts out;
  for (const TensorSpec& t : checkpoint_tensor_specs(c)) {
    if (t.shape.size() != 2 || !read_by_target_step(t)) continue;  // norms, sinks, gathers
    double flops = 2.0 * static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
    if (contains(t.name, ".experts.")) {
      flops *= static_cast<double>(c.n_activated_experts) / c.n_routed_experts;
    }
    if (contains(t.name, "indexer.wk")) flops /= std::max(ratio_of(c, t.name), 1);
    const bool fp8 = t.kind == TensorKind::kFp8Matrix || t.kind == TensorKind::kFp4Matrix;
    ForwardFlops& into = t.name == "head" ? out.head : out.per_row;
    (fp8 ? into.fp8 : into.bf16) += flops;
  }
  return out;
}

// Attention of one query that sees `keys` positions (its own included), every backbone layer.
double attention_flops(const ModelConfig& c, int64_t keys) {
  double flops = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    int64_t attended = std::min<int64_t>(c.window_size, keys);
    const int ratio = c.compress_ratios[static_cast<size_t>(l)];
    if (ratio > 0) {
      const int64_t entries = keys / ratio;
      attended += std::min<int64_t>(c.index_topk, entries);
      if (c.is_index_source(l)) {
        flops += 2.0 * c.index_n_heads * c.index_head_dim * static_cast<double>(entries);
      }
    }
    flops += 4.0 * c.n_heads * c.head_dim * static_cast<double>(attended);  // QK^T and PV
  }
  return flops;
}

}  // namespace

ForwardFlops decode_step_flops(const ModelConfig& c, int64_t batch, int64_t context) {
  const RowProducts p = row_products(c);
  const double rows = static_cast<double>(batch);
  return {rows * (p.per_row.fp8 + p.head.fp8),
          rows * (p.per_row.bf16 + p.head.bf16 + attention_flops(c, context + 1))};
}

ForwardFlops prefill_flops(const ModelConfig& c,
                           int64_t batch,
                           int64_t prompt_len,
                           int64_t context) {
  const RowProducts p = row_products(c);
  const double rows = static_cast<double>(batch) * static_cast<double>(prompt_len);
  double attention = 0;
  for (int64_t i = 1; i <= prompt_len; ++i) attention += attention_flops(c, context + i);
  return {rows * p.per_row.fp8 + batch * p.head.fp8,
          rows * p.per_row.bf16 + batch * (p.head.bf16 + attention)};
}

}  // namespace di::model
