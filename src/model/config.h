// The V4.1 hyper-parameters, read from a checkpoint's config.json in either the official inference
// format (`dim`, `n_layers`, `compress_ratios`, ...) or the Hugging Face format (`text_config`).
// Spec: shared/spec/deepseek-v41-model.md §1-2; field meanings follow the reference's ModelArgs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace di::model {

// What a layer does with compressed attention (spec §1.2).
enum class LayerMode {
  kSwa,      // ratio 0: sliding window only
  kFull,     // owns a compressor and index keys and runs its own indexer (a KV source)
  kReuse,    // window + the nearest source's compressed KV at the nearest index source's selection
  kReindex,  // runs its own indexer queries against the nearest source's index keys
};
const char* layer_mode_name(LayerMode mode);

struct ModelConfig {
  // runtime limit, not model shape: the longest sequence the state pools accept
  int max_seq_len = 4096;
  std::string dtype = "fp8";
  std::string expert_dtype = "fp4";
  int vocab_size = 0;
  int dim = 0;
  int moe_inter_dim = 0;
  int n_layers = 0;
  int n_mtp_layers = 0;
  int n_heads = 0;
  // MoE
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int n_activated_experts = 0;
  std::string score_func = "sqrtsoftplus";
  float gate_temp = 1.0f;
  bool norm_topk_prob = true;
  float route_scale = 1.0f;
  float swiglu_limit = 0.0f;
  // attention
  int q_lora_rank = 0;
  int head_dim = 0;
  int rope_head_dim = 0;
  float norm_eps = 1e-20f;
  int o_groups = 1;
  int o_lora_rank = 0;
  int window_size = 0;
  std::vector<int> compress_ratios;  // n_layers + n_mtp_layers entries
  std::vector<int> kv_source_layers;
  std::vector<int> index_source_layers;
  float compress_rope_theta = 40000.0f;
  int original_seq_len = 0;
  float rope_theta = 10000.0f;
  float rope_factor = 40.0f;
  int beta_fast = 32;
  int beta_slow = 1;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source_layer = -1;
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  // hyper-connections
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  // Engram
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int engram_max_ngram_size = 1;
  int64_t engram_vocab_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 2;
  int engram_compressed_vocab_size = 0;
  // vision (the tower is not implemented yet; its weights may be present and are ignored)
  int vision_n_layers = 0;
  int image_token_id = 129264;
  // DSpark draft head (stored as mtp.*)
  int dspark_block_size = 0;
  int dspark_noise_token_id = 0;
  std::vector<int> dspark_target_layer_ids;
  int dspark_markov_rank = 256;
  int dspark_n_routed_experts = 0;
  int dspark_n_activated_experts = 0;

  // Derived queries.
  int num_total_layers() const { return n_layers + n_mtp_layers; }
  bool has_dspark() const { return dspark_block_size > 0 && n_mtp_layers > 0; }
  LayerMode layer_mode(int layer) const;
  bool is_kv_source(int layer) const;
  bool is_index_source(int layer) const;
  // The KV source whose compressed entries layer `layer` attends (-1 for ratio-0 layers).
  int kv_source_of(int layer) const;
  // The index source whose selection layer `layer` uses (-1 for ratio-0 layers).
  int index_source_of(int layer) const;
  int engram_index(int layer) const;  // position in engram_layer_ids, or -1
  // The first layer whose prefill output only matters for a prompt's tail (spec §1.2): after the
  // last KV source and the last Engram layer; n_layers when there is none.
  int late_layer_start() const;
  int routed_experts_of(int layer) const;
  int activated_experts_of(int layer) const;
};

// Checks every field and the relations between them; the message names the field.
Status validate_config(const ModelConfig& config);

// Parses config.json text in the official or Hugging Face format and validates it. Unknown fields
// are an error (a typo must not silently fall back to a default).
Expected<ModelConfig> parse_model_config(const std::string& json_text);
Expected<ModelConfig> load_model_config(const std::string& path);

// The official-format JSON text of a config (what init-model writes).
std::string model_config_to_json(const ModelConfig& config);

}  // namespace di::model
