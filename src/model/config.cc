#include "model/config.h"

#include <algorithm>
#include <string>

namespace di::model {

const char* layer_mode_name(LayerMode mode) {
  switch (mode) {
    case LayerMode::kSwa:
      return "SWA";
    case LayerMode::kFull:
      return "Full";
    case LayerMode::kReuse:
      return "Reuse";
    case LayerMode::kReindex:
      return "Reindex";
  }
  return "?";
}

namespace {
bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

bool ModelConfig::is_kv_source(int layer) const {
  return layer < n_layers && contains(kv_source_layers, layer);
}
bool ModelConfig::is_index_source(int layer) const {
  return layer < n_layers && contains(index_source_layers, layer);
}

LayerMode ModelConfig::layer_mode(int layer) const {
  if (compress_ratios[layer] == 0) return LayerMode::kSwa;
  if (is_kv_source(layer)) return LayerMode::kFull;
  if (is_index_source(layer)) return LayerMode::kReindex;
  return LayerMode::kReuse;
}

int ModelConfig::kv_source_of(int layer) const {
  if (compress_ratios[layer] == 0) return -1;
  int best = -1;
  for (int s : kv_source_layers) {
    if (s <= layer && s > best) best = s;
  }
  return best;
}

int ModelConfig::index_source_of(int layer) const {
  if (compress_ratios[layer] == 0) return -1;
  int best = -1;
  for (int s : index_source_layers) {
    if (s <= layer && s > best) best = s;
  }
  return best;
}

int ModelConfig::engram_index(int layer) const {
  for (size_t i = 0; i < engram_layer_ids.size(); ++i) {
    if (engram_layer_ids[i] == layer) return static_cast<int>(i);
  }
  return -1;
}

int ModelConfig::late_layer_start() const {
  int start = 0;
  for (int s : kv_source_layers) start = std::max(start, s + 1);
  for (int e : engram_layer_ids) start = std::max(start, e + 1);
  return start == 0 ? n_layers : std::min(start, n_layers);
}

int ModelConfig::routed_experts_of(int layer) const {
  if (layer < n_layers || dspark_n_routed_experts == 0) return n_routed_experts;
  return dspark_n_routed_experts;
}
int ModelConfig::activated_experts_of(int layer) const {
  if (layer < n_layers || dspark_n_activated_experts == 0) return n_activated_experts;
  return dspark_n_activated_experts;
}

namespace {

Status require(bool ok, const std::string& message) {
  return ok ? Status() : invalid_argument("config: " + message);
}

Status validate_layers(const ModelConfig& c) {
  int total = c.num_total_layers();
  DI_RETURN_IF_ERROR(
      require(static_cast<int>(c.compress_ratios.size()) == total,
              "compress_ratios has " + std::to_string(c.compress_ratios.size()) +
                  " entries, expected n_layers + n_mtp_layers = " + std::to_string(total)));
  for (int i = 0; i < total; ++i) {
    int r = c.compress_ratios[i];
    DI_RETURN_IF_ERROR(
        require(r >= 0 && r <= 64, "compress_ratios[" + std::to_string(i) + "] out of range"));
    if (i >= c.n_layers) {
      DI_RETURN_IF_ERROR(require(r == 0, "DSpark layers must have compress ratio 0"));
    }
  }
  for (int s : c.kv_source_layers) {
    DI_RETURN_IF_ERROR(require(s >= 0 && s < c.n_layers && c.compress_ratios[s] > 0,
                               "kv_source_layers entry " + std::to_string(s) +
                                   " is not a backbone layer with compress ratio > 0"));
  }
  for (int s : c.index_source_layers) {
    DI_RETURN_IF_ERROR(require(s >= 0 && s < c.n_layers && c.compress_ratios[s] > 0,
                               "index_source_layers entry " + std::to_string(s) +
                                   " is not a backbone layer with compress ratio > 0"));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.compress_ratios[l] == 0) continue;
    int src = c.kv_source_of(l);
    DI_RETURN_IF_ERROR(require(
        src >= 0, "layer " + std::to_string(l) + " compresses but no kv source precedes it"));
    DI_RETURN_IF_ERROR(require(c.compress_ratios[src] == c.compress_ratios[l],
                               "layer " + std::to_string(l) + " has ratio " +
                                   std::to_string(c.compress_ratios[l]) + " but its kv source " +
                                   std::to_string(src) + " has another"));
    DI_RETURN_IF_ERROR(require(c.index_source_of(l) >= 0,
                               "layer " + std::to_string(l) + " has no preceding index source"));
  }
  if (c.candidate_source_layer >= 0) {
    DI_RETURN_IF_ERROR(require(
        c.is_index_source(c.candidate_source_layer) && c.is_kv_source(c.candidate_source_layer),
        "candidate_source_layer must be a kv and index source"));
    DI_RETURN_IF_ERROR(require(c.candidate_topk_blocks > 0 && c.candidate_block_size > 0,
                               "candidate_topk_blocks and candidate_block_size must be > 0"));
  }
  return Status();
}

Status validate_dims(const ModelConfig& c) {
  DI_RETURN_IF_ERROR(require(c.vocab_size > 0 && c.dim > 0 && c.n_layers > 0 && c.n_heads > 0,
                             "vocab_size, dim, n_layers and n_heads must be > 0"));
  DI_RETURN_IF_ERROR(
      require(c.dim % 32 == 0 && c.moe_inter_dim % 32 == 0 && c.q_lora_rank % 32 == 0,
              "dim, moe_inter_dim and q_lora_rank must be multiples of 32"));
  DI_RETURN_IF_ERROR(
      require(c.head_dim % 32 == 0 && c.rope_head_dim > 0 && c.rope_head_dim % 2 == 0 &&
                  c.rope_head_dim <= c.head_dim,
              "head_dim must be a multiple of 32 and rope_head_dim even, <= head_dim"));
  DI_RETURN_IF_ERROR(require(c.o_groups > 0 && c.n_heads % c.o_groups == 0,
                             "n_heads must be divisible by o_groups"));
  DI_RETURN_IF_ERROR(require(c.o_lora_rank > 0 && (c.o_groups * c.o_lora_rank) % 32 == 0,
                             "o_groups * o_lora_rank must be a multiple of 32"));
  DI_RETURN_IF_ERROR(require(c.window_size > 0, "window_size must be > 0"));
  DI_RETURN_IF_ERROR(require(c.n_routed_experts > 0 && c.n_activated_experts > 0 &&
                                 c.n_activated_experts <= c.n_routed_experts,
                             "need 0 < n_activated_experts <= n_routed_experts"));
  // The router and the hyper-connection kernels keep per-token scratch on the stack.
  DI_RETURN_IF_ERROR(require(c.n_routed_experts <= 1024 && c.dspark_n_routed_experts <= 1024,
                             "n_routed_experts and dspark_n_routed_experts must be <= 1024"));
  DI_RETURN_IF_ERROR(require(
      c.dspark_n_activated_experts <= std::max(c.dspark_n_routed_experts, c.n_routed_experts),
      "dspark_n_activated_experts exceeds the DSpark experts"));
  DI_RETURN_IF_ERROR(require(c.n_shared_experts == 1, "n_shared_experts must be 1"));
  DI_RETURN_IF_ERROR(require(
      c.score_func == "sqrtsoftplus" || c.score_func == "sigmoid" || c.score_func == "softmax",
      "score_func must be sqrtsoftplus, sigmoid or softmax"));
  DI_RETURN_IF_ERROR(
      require(c.dtype == "fp8" || c.dtype == "bf16", "dtype must be \"fp8\" or \"bf16\""));
  DI_RETURN_IF_ERROR(
      require(c.expert_dtype == "fp4" || c.expert_dtype == "fp8" ||
                  (c.dtype == "bf16" && c.expert_dtype.empty()),
              "expert_dtype must be \"fp4\" or \"fp8\" (or empty for a bf16 model)"));
  DI_RETURN_IF_ERROR(require(c.hc_mult > 0 && c.hc_mult <= 8 && c.hc_sinkhorn_iters > 0,
                             "hc_mult must be in [1, 8] and hc_sinkhorn_iters > 0"));
  bool any_compress =
      std::any_of(c.compress_ratios.begin(), c.compress_ratios.end(), [](int r) { return r > 0; });
  if (any_compress) {
    DI_RETURN_IF_ERROR(require(c.index_n_heads > 0 && c.index_head_dim % 32 == 0 &&
                                   c.index_head_dim >= c.rope_head_dim && c.index_topk > 0,
                               "index_n_heads, index_head_dim (multiple of 32, >= rope_head_dim) "
                               "and index_topk must be set"));
  }
  DI_RETURN_IF_ERROR(require(c.max_seq_len > 0, "max_seq_len must be > 0"));
  return Status();
}

Status validate_extras(const ModelConfig& c) {
  if (!c.engram_layer_ids.empty()) {
    DI_RETURN_IF_ERROR(require(c.engram_num_embeddings.size() == c.engram_layer_ids.size(),
                               "engram_num_embeddings needs one entry per engram layer"));
    DI_RETURN_IF_ERROR(
        require(c.engram_max_ngram_size >= 2 && c.engram_n_heads > 0 &&
                    c.engram_head_dim % 32 == 0 && c.engram_head_dim > 0,
                "engram needs max_ngram_size >= 2, n_heads > 0, head_dim % 32 == 0"));
    DI_RETURN_IF_ERROR(require(c.engram_compressed_vocab_size > 0 && c.engram_vocab_size > 1,
                               "engram_compressed_vocab_size and engram_vocab_size must be set"));
    for (int l : c.engram_layer_ids) {
      DI_RETURN_IF_ERROR(require(l >= 0 && l < c.n_layers, "engram layer out of range"));
    }
  }
  if (c.n_mtp_layers > 0 && c.dspark_block_size > 0) {
    DI_RETURN_IF_ERROR(require(!c.dspark_target_layer_ids.empty(), "DSpark needs target layers"));
    for (int l : c.dspark_target_layer_ids) {
      DI_RETURN_IF_ERROR(require(l >= 0 && l < c.n_layers, "dspark_target_layer_ids out of range"));
    }
    DI_RETURN_IF_ERROR(require(c.dspark_markov_rank > 0, "dspark_markov_rank must be > 0"));
    DI_RETURN_IF_ERROR(
        require(c.dspark_noise_token_id >= 0 && c.dspark_noise_token_id < c.vocab_size,
                "dspark_noise_token_id out of range"));
  }
  return Status();
}

}  // namespace

Status validate_config(const ModelConfig& config) {
  DI_RETURN_IF_ERROR(validate_dims(config));
  DI_RETURN_IF_ERROR(validate_layers(config));
  return validate_extras(config);
}

}  // namespace di::model
