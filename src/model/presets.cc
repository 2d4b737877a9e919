#include "model/presets.h"

#include <algorithm>

namespace di::model {

void apply_layer_schedule(ModelConfig& c, int n, int mtp) {
  c.n_layers = n;
  c.n_mtp_layers = mtp;
  c.compress_ratios.assign(static_cast<size_t>(n + mtp), 0);
  c.kv_source_layers.clear();
  c.index_source_layers.clear();
  c.candidate_source_layer = -1;
  for (int l = 1; l < n; ++l) {
    const int slot =
        l;  // 1: Full r2, 2: Reuse r2, 3: Full r1 + candidates, 4: Reuse, 5: Reindex...
    c.compress_ratios[static_cast<size_t>(l)] = slot <= 2 ? 2 : 1;
    if (slot == 1 || slot == 3) {
      c.kv_source_layers.push_back(l);
      c.index_source_layers.push_back(l);
    }
    if (slot == 3) c.candidate_source_layer = l;
    if (slot >= 5 && slot % 2 == 1) c.index_source_layers.push_back(l);
  }
  if (c.candidate_source_layer < 0) {
    c.candidate_topk_blocks = 0;
    c.candidate_block_size = 0;
  }
  c.dspark_target_layer_ids.clear();
  for (int l = std::max(0, n - 3); l < n; ++l) c.dspark_target_layer_ids.push_back(l);
  if (mtp == 0) c.dspark_block_size = 0;
  c.engram_layer_ids.clear();
  c.engram_num_embeddings.clear();
}

namespace {

ModelConfig mini() {
  ModelConfig c;
  c.max_seq_len = 4096;
  c.vocab_size = 129280;
  c.dim = 128;
  c.moe_inter_dim = 64;
  c.n_heads = 4;
  c.n_routed_experts = 8;
  c.n_activated_experts = 2;
  c.route_scale = 1.5f;
  c.swiglu_limit = 0.5f;
  c.q_lora_rank = 64;
  c.head_dim = 64;
  c.rope_head_dim = 16;
  c.o_groups = 2;
  c.o_lora_rank = 32;
  c.window_size = 8;
  c.original_seq_len = 64;
  c.compress_rope_theta = 160000;
  c.rope_factor = 16;
  c.index_n_heads = 8;
  c.index_head_dim = 32;
  c.index_topk = 4;
  c.candidate_topk_blocks = 2;
  c.candidate_block_size = 4;
  c.engram_max_ngram_size = 3;
  c.engram_vocab_size = 50;
  c.engram_n_heads = 2;
  c.engram_head_dim = 32;
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = 128799;
  c.dspark_markov_rank = 16;
  c.dspark_n_routed_experts = 4;
  c.dspark_n_activated_experts = 2;
  return c;
}

ModelConfig v41_shaped() {
  ModelConfig c;
  c.max_seq_len = 1 << 20;
  c.vocab_size = 129280;
  c.dim = 5120;
  c.moe_inter_dim = 2304;
  c.n_heads = 64;
  c.n_routed_experts = 16;
  c.n_activated_experts = 6;
  c.route_scale = 1.5f;
  c.swiglu_limit = 10.0f;
  c.q_lora_rank = 1280;
  c.head_dim = 512;
  c.rope_head_dim = 64;
  c.o_groups = 8;
  c.o_lora_rank = 1024;
  c.window_size = 128;
  c.original_seq_len = 65536;
  c.compress_rope_theta = 160000;
  c.rope_factor = 16;
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.candidate_topk_blocks = 2048;
  c.candidate_block_size = 8;
  // Full-size Engram tables hold 384M rows per layer; the shaped preset keeps the row width and
  // the hashing but uses small prime buckets.
  c.engram_max_ngram_size = 4;
  c.engram_vocab_size = 4000;
  c.engram_n_heads = 8;
  c.engram_head_dim = 256;
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = 128799;
  c.dspark_markov_rank = 256;
  c.dspark_n_routed_experts = 16;
  c.dspark_n_activated_experts = 3;
  return c;
}

}  // namespace

Expected<ModelConfig> preset_config(const std::string& name, const PresetOptions& o) {
  ModelConfig c;
  int layers = 0, mtp = 0;
  if (name == "mini") {
    c = mini();
    layers = 8;
    mtp = 2;
  } else if (name == "v41-shaped") {
    c = v41_shaped();
    layers = 6;
    mtp = 1;
  } else {
    return invalid_argument("unknown preset '" + name +
                            "' (expected mini, v41-shaped or a config JSON file)");
  }
  if (o.num_layers < 0 || o.num_experts < 0)
    return invalid_argument("--layers and --experts must be >= 0");
  if (o.num_layers > 0) layers = o.num_layers;
  if (o.num_mtp_layers >= 0) mtp = o.num_mtp_layers;
  if (o.num_experts > 0) {
    c.n_routed_experts = o.num_experts;
    c.n_activated_experts = std::min(c.n_activated_experts, o.num_experts);
    c.dspark_n_routed_experts = std::min(c.dspark_n_routed_experts, o.num_experts);
    c.dspark_n_activated_experts =
        std::min(c.dspark_n_activated_experts, c.dspark_n_routed_experts);
  }
  apply_layer_schedule(c, layers, mtp);
  // Engram on the first compressed layer's predecessor, as V4.1 puts it early (layers 1 and 14).
  if (layers >= 2) c.engram_layer_ids = {1};
  return c;
}

}  // namespace di::model
