#include "model/tensor_names.h"

#include <array>
#include <utility>

namespace di::model {

namespace {

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

// Component renames inside a layer, longest first so that prefixes do not shadow each other.
constexpr std::array<std::pair<const char*, const char*>, 30> kLayerRenames = {{
    {"attn.compressor.wkv.", "self_attn.compressor.kv_proj."},
    {"attn.compressor.wgate.", "self_attn.compressor.gate_proj."},
    {"attn.compressor.norm.", "self_attn.compressor.kv_norm."},
    {"attn.indexer.wq_b.", "self_attn.indexer.q_b_proj."},
    {"attn.indexer.weights_proj.", "self_attn.indexer.weights_proj."},
    {"attn.indexer.wk.", "self_attn.indexer.k_proj."},
    {"attn.indexer.k_norm.", "self_attn.indexer.k_norm."},
    {"attn.wq_a.", "self_attn.q_a_proj."},
    {"attn.q_norm.", "self_attn.q_norm."},
    {"attn.wq_b.", "self_attn.q_b_proj."},
    {"attn.wkv.", "self_attn.kv_proj."},
    {"attn.kv_norm.", "self_attn.kv_norm."},
    {"attn.wo_a.", "self_attn.o_a_proj."},
    {"attn.wo_b.", "self_attn.o_b_proj."},
    {"attn.attn_sink", "self_attn.sinks"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.", "mlp.gate."},
    {"ffn.shared_experts.w1.", "mlp.shared_experts.gate_proj."},
    {"ffn.shared_experts.w2.", "mlp.shared_experts.down_proj."},
    {"ffn.shared_experts.w3.", "mlp.shared_experts.up_proj."},
    {"attn_norm.", "input_layernorm."},
    {"ffn_norm.", "post_attention_layernorm."},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"engram.", "engram."},
    {"ffn.experts.", "mlp.experts."},
}};

std::string rename_expert(std::string rest) {
  // experts.E.w1 -> experts.E.gate_proj, w2 -> down_proj, w3 -> up_proj
  for (auto [from, to] : {std::pair{".w1.", ".gate_proj."}, std::pair{".w2.", ".down_proj."},
                          std::pair{".w3.", ".up_proj."}}) {
    auto pos = rest.find(from);
    if (pos != std::string::npos) return rest.replace(pos, std::string(from).size(), to);
  }
  return rest;
}

std::string rename_suffix(std::string name) {
  // FP8 scales are `weight_scale_inv` in Hugging Face exports.
  const std::string scale = ".scale";
  if (name.size() > scale.size() &&
      name.compare(name.size() - scale.size(), scale.size(), scale) == 0 &&
      name.find("hc.scale") == std::string::npos) {
    name.replace(name.size() - scale.size(), scale.size(), ".weight_scale_inv");
  }
  return name;
}

}  // namespace

std::string hf_tensor_alias(const std::string& name) {
  if (name == "embed.weight") return "model.embed_tokens.weight";
  if (name == "head.weight") return "lm_head.weight";
  if (name == "norm.weight") return "model.norm.weight";
  for (const char* prefix : {"layers.", "mtp."}) {
    if (!starts_with(name, prefix)) continue;
    const size_t dot = name.find('.', std::string(prefix).size());
    if (dot == std::string::npos) return "";
    const std::string head = "model." + name.substr(0, dot + 1);
    const std::string rest = name.substr(dot + 1);
    for (auto [from, to] : kLayerRenames) {
      if (starts_with(rest, from)) {
        std::string renamed = to + rest.substr(std::string(from).size());
        if (starts_with(rest, "ffn.experts.")) renamed = rename_expert(renamed);
        return rename_suffix(head + renamed);
      }
    }
    return rename_suffix(head + rest);  // DSpark extras keep their names under model.mtp.N
  }
  return "";
}

}  // namespace di::model
