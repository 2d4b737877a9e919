// Every tensor of a V4.1 checkpoint bound to the layer that uses it, with presence, shape and dtype
// checked against the config before any use (spec §1.9 for formats and names). Large matrices stay
// in the memory-mapped checkpoint; small parameters (norms, biases, hc params) are copied to f32.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weights/checkpoint.h"
#include "tensor/weight_view.h"
#include "util/status.h"

namespace di::model {

struct ExpertWeights {
  WeightView w1, w2, w3;  // w1/w3: [inter, dim], w2: [dim, inter]
};

struct AttentionWeights {
  WeightView wq_a, wq_b, wkv, wo_b;
  std::vector<uint16_t>
      wo_a;  // bf16 bits, [o_groups * o_lora_rank, n_heads * head_dim / o_groups], dequantized
  std::vector<float> q_norm, kv_norm, attn_sink;
  // compressor (kv sources): wkv/wgate are applied in fp32 at ratio > 1, in bf16 at ratio 1
  WeightView comp_wkv, comp_wgate;
  std::vector<float> comp_norm;
  // indexer (index sources); wk/k_norm only for kv sources, which own the index keys
  WeightView idx_wq_b, idx_weights_proj, idx_wk;
  std::vector<float> idx_k_norm;
};

struct MoeWeights {
  WeightView gate;  // [n_experts, dim] bf16, applied in fp32
  std::vector<float> bias;
  std::vector<ExpertWeights> experts;
  // The same routed matrices side by side (set at bind, immutable), as a fused MoE takes them.
  std::vector<WeightView> experts_w1, experts_w3, experts_w2;
  ExpertWeights shared;
};

struct EngramWeights {
  const uint8_t* table = nullptr;        // [rows, head_dim] e4m3
  const uint8_t* table_scale = nullptr;  // [rows, head_dim / 32] ue8m0
  int64_t rows = 0;
  WeightView wkv;                // [(hc + 1) * dim, n_cols * head_dim] FP8
  std::vector<float> qk_weight;  // q_weight * k_weight, [hc * dim]
};

struct HcWeights {
  std::vector<float> fn, base, scale;  // [(2+hc)*hc, hc*dim], [(2+hc)*hc], [3]
};

struct DsparkHeadWeights {
  WeightView main_proj;  // stage 0: [dim, dim * n_targets] FP8
  std::vector<float> main_norm;
  std::vector<float> norm;     // last stage
  WeightView markov_embed;     // [vocab, rank] bf16
  WeightView markov_head;      // [vocab, rank] applied in fp32
  WeightView confidence_proj;  // [1, dim + rank] applied in fp32
};

struct LayerWeights {
  int layer_id = 0;
  AttentionWeights attn;
  MoeWeights ffn;
  std::vector<float> attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  std::optional<EngramWeights> engram;
};

struct ModelWeights {
  WeightView embed;  // [vocab, dim] bf16
  WeightView head;   // [vocab, dim] applied in fp32
  std::vector<float> norm;
  std::vector<LayerWeights> layers;  // n_layers backbone, then n_mtp_layers DSpark layers
  DsparkHeadWeights dspark;
  // Copies of checkpoint tensors whose storage was misaligned for their dtype.
  std::vector<std::shared_ptr<std::vector<uint8_t>>> aligned_copies;
};

// Binds every tensor the config requires. Errors name the file and tensor.
Expected<ModelWeights> bind_model_weights(const ModelConfig& config,
                                          const weights::Checkpoint& checkpoint);

}  // namespace di::model
