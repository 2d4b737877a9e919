// Reading and writing config.json. Both formats map onto the same ModelConfig through one table of
// fields, so a field is named once per format.
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model/config.h"

namespace di::model {
namespace {

using json = nlohmann::json;

// A binder reads one JSON value into a config field, or explains why it cannot.
using Binder = std::function<Status(const json&, ModelConfig&)>;

template <class T>
Binder bind_field(T ModelConfig::*field) {
  return [field](const json& v, ModelConfig& c) -> Status {
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) return invalid_argument("expected a boolean");
      } else if constexpr (std::is_arithmetic_v<T>) {
        if (!v.is_number()) return invalid_argument("expected a number");
        if constexpr (std::is_integral_v<T>) {
          if (!v.is_number_integer()) return invalid_argument("expected an integer");
        }
      } else if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) return invalid_argument("expected a string");
      } else {
        if (!v.is_array()) return invalid_argument("expected a list");
        for (const auto& e : v) {
          if (!e.is_number_integer()) return invalid_argument("expected a list of integers");
        }
      }
      c.*field = v.get<T>();
    } catch (const json::exception& e) {
      return invalid_argument(e.what());
    }
    return Status();
  };
}

// Fields accepted and ignored (runtime settings of the reference, or metadata).
Binder ignore() {
  return [](const json&, ModelConfig&) { return Status(); };
}

const std::map<std::string, Binder>& official_fields() {
  static const std::map<std::string, Binder> fields = {
      {"max_batch_size", ignore()},
      {"max_seq_len", bind_field(&ModelConfig::max_seq_len)},
      {"temperature", ignore()},
      {"dtype", bind_field(&ModelConfig::dtype)},
      {"expert_dtype", bind_field(&ModelConfig::expert_dtype)},
      {"vocab_size", bind_field(&ModelConfig::vocab_size)},
      {"dim", bind_field(&ModelConfig::dim)},
      {"moe_inter_dim", bind_field(&ModelConfig::moe_inter_dim)},
      {"n_layers", bind_field(&ModelConfig::n_layers)},
      {"n_mtp_layers", bind_field(&ModelConfig::n_mtp_layers)},
      {"n_heads", bind_field(&ModelConfig::n_heads)},
      {"n_routed_experts", bind_field(&ModelConfig::n_routed_experts)},
      {"n_shared_experts", bind_field(&ModelConfig::n_shared_experts)},
      {"n_activated_experts", bind_field(&ModelConfig::n_activated_experts)},
      {"score_func", bind_field(&ModelConfig::score_func)},
      {"gate_temp", bind_field(&ModelConfig::gate_temp)},
      {"norm_topk_prob", bind_field(&ModelConfig::norm_topk_prob)},
      {"route_scale", bind_field(&ModelConfig::route_scale)},
      {"swiglu_limit", bind_field(&ModelConfig::swiglu_limit)},
      {"q_lora_rank", bind_field(&ModelConfig::q_lora_rank)},
      {"head_dim", bind_field(&ModelConfig::head_dim)},
      {"rope_head_dim", bind_field(&ModelConfig::rope_head_dim)},
      {"norm_eps", bind_field(&ModelConfig::norm_eps)},
      {"o_groups", bind_field(&ModelConfig::o_groups)},
      {"o_lora_rank", bind_field(&ModelConfig::o_lora_rank)},
      {"window_size", bind_field(&ModelConfig::window_size)},
      {"compress_ratios", bind_field(&ModelConfig::compress_ratios)},
      {"kv_source_layers", bind_field(&ModelConfig::kv_source_layers)},
      {"index_source_layers", bind_field(&ModelConfig::index_source_layers)},
      {"compress_rope_theta", bind_field(&ModelConfig::compress_rope_theta)},
      {"original_seq_len", bind_field(&ModelConfig::original_seq_len)},
      {"rope_theta", bind_field(&ModelConfig::rope_theta)},
      {"rope_factor", bind_field(&ModelConfig::rope_factor)},
      {"beta_fast", bind_field(&ModelConfig::beta_fast)},
      {"beta_slow", bind_field(&ModelConfig::beta_slow)},
      {"index_n_heads", bind_field(&ModelConfig::index_n_heads)},
      {"index_head_dim", bind_field(&ModelConfig::index_head_dim)},
      {"index_topk", bind_field(&ModelConfig::index_topk)},
      {"candidate_source_layer", bind_field(&ModelConfig::candidate_source_layer)},
      {"candidate_topk_blocks", bind_field(&ModelConfig::candidate_topk_blocks)},
      {"candidate_block_size", bind_field(&ModelConfig::candidate_block_size)},
      {"hc_mult", bind_field(&ModelConfig::hc_mult)},
      {"hc_sinkhorn_iters", bind_field(&ModelConfig::hc_sinkhorn_iters)},
      {"hc_eps", bind_field(&ModelConfig::hc_eps)},
      {"engram_layer_ids", bind_field(&ModelConfig::engram_layer_ids)},
      {"engram_num_embeddings", bind_field(&ModelConfig::engram_num_embeddings)},
      {"engram_max_ngram_size", bind_field(&ModelConfig::engram_max_ngram_size)},
      {"engram_vocab_size", bind_field(&ModelConfig::engram_vocab_size)},
      {"engram_n_heads", bind_field(&ModelConfig::engram_n_heads)},
      {"engram_head_dim", bind_field(&ModelConfig::engram_head_dim)},
      {"engram_pad_id", bind_field(&ModelConfig::engram_pad_id)},
      {"engram_compressed_vocab_size", bind_field(&ModelConfig::engram_compressed_vocab_size)},
      {"vision_n_layers", bind_field(&ModelConfig::vision_n_layers)},
      {"vision_dim", ignore()},
      {"vision_n_heads", ignore()},
      {"vision_inter_dim", ignore()},
      {"vision_patch_size", ignore()},
      {"vision_rope_theta", ignore()},
      {"vision_downsample_ratio", ignore()},
      {"vision_max_n_token", ignore()},
      {"vision_min_pixels", ignore()},
      {"vision_max_wh_ratio", ignore()},
      {"image_token_id", bind_field(&ModelConfig::image_token_id)},
      {"dspark_block_size", bind_field(&ModelConfig::dspark_block_size)},
      {"dspark_noise_token_id", bind_field(&ModelConfig::dspark_noise_token_id)},
      {"dspark_target_layer_ids", bind_field(&ModelConfig::dspark_target_layer_ids)},
      {"dspark_markov_rank", bind_field(&ModelConfig::dspark_markov_rank)},
      {"dspark_n_routed_experts", bind_field(&ModelConfig::dspark_n_routed_experts)},
      {"dspark_n_activated_experts", bind_field(&ModelConfig::dspark_n_activated_experts)},
  };
  return fields;
}

// Hugging Face text_config name -> official name ("" = accepted and checked elsewhere/ignored).
const std::map<std::string, std::string>& hf_text_names() {
  static const std::map<std::string, std::string> names = {
      {"model_type", ""},
      {"vocab_size", "vocab_size"},
      {"hidden_size", "dim"},
      {"moe_intermediate_size", "moe_inter_dim"},
      {"num_hidden_layers", "n_layers"},
      {"num_attention_heads", "n_heads"},
      {"num_key_value_heads", ""},
      {"head_dim", "head_dim"},
      {"qk_rope_head_dim", "rope_head_dim"},
      {"q_lora_rank", "q_lora_rank"},
      {"o_lora_rank", "o_lora_rank"},
      {"o_groups", "o_groups"},
      {"hidden_act", ""},
      {"swiglu_limit", "swiglu_limit"},
      {"rms_norm_eps", "norm_eps"},
      {"attention_bias", ""},
      {"max_position_embeddings", "max_seq_len"},
      {"rope_theta", "rope_theta"},
      {"rope_scaling", ""},
      {"n_routed_experts", "n_routed_experts"},
      {"n_shared_experts", "n_shared_experts"},
      {"num_experts_per_tok", "n_activated_experts"},
      {"scoring_func", "score_func"},
      {"topk_method", ""},
      {"norm_topk_prob", "norm_topk_prob"},
      {"routed_scaling_factor", "route_scale"},
      {"gate_temp", "gate_temp"},
      {"sliding_window", "window_size"},
      {"compress_ratios", "compress_ratios"},
      {"compress_rope_theta", "compress_rope_theta"},
      {"kv_source_layer_ids", "kv_source_layers"},
      {"index_source_layer_ids", "index_source_layers"},
      {"index_n_heads", "index_n_heads"},
      {"index_head_dim", "index_head_dim"},
      {"index_topk", "index_topk"},
      {"candidate_source_layer_id", "candidate_source_layer"},
      {"candidate_topk_blocks", "candidate_topk_blocks"},
      {"candidate_block_size", "candidate_block_size"},
      {"hc_mult", "hc_mult"},
      {"hc_sinkhorn_iters", "hc_sinkhorn_iters"},
      {"hc_eps", "hc_eps"},
      {"engram_layer_ids", "engram_layer_ids"},
      {"engram_num_embeddings", "engram_num_embeddings"},
      {"engram_max_ngram_size", "engram_max_ngram_size"},
      {"engram_vocab_size", "engram_vocab_size"},
      {"engram_n_heads", "engram_n_heads"},
      {"engram_head_dim", "engram_head_dim"},
      {"engram_pad_token_id", "engram_pad_id"},
      {"engram_pad_id", "engram_pad_id"},
      {"engram_compressed_vocab_size", "engram_compressed_vocab_size"},
      {"num_nextn_predict_layers", "n_mtp_layers"},
      {"dspark_block_size", "dspark_block_size"},
      {"dspark_noise_token_id", "dspark_noise_token_id"},
      {"dspark_target_layer_ids", "dspark_target_layer_ids"},
      {"dspark_markov_rank", "dspark_markov_rank"},
      {"dspark_n_routed_experts", "dspark_n_routed_experts"},
      {"dspark_num_experts_per_tok", "dspark_n_activated_experts"},
      {"bos_token_id", ""},
      {"eos_token_id", ""},
      {"pad_token_id", ""},
      {"image_token_id", "image_token_id"},
      {"tie_word_embeddings", ""},
      {"torch_dtype", ""},
      {"dtype", ""},
  };
  return names;
}

const std::set<std::string>& hf_top_level_names() {
  static const std::set<std::string> names = {
      "architectures",      "model_type",          "dtype",
      "torch_dtype",        "bos_token_id",        "eos_token_id",
      "pad_token_id",       "image_token_id",      "text_config",
      "vision_config",      "quantization_config", "transformers_version",
      "tie_word_embeddings"};
  return names;
}

Status apply_field(const std::string& name,
                   const json& value,
                   ModelConfig& config,
                   const std::string& where) {
  auto it = official_fields().find(name);
  if (it == official_fields().end())
    return invalid_argument(where + ": unknown field '" + name + "'");
  return it->second(value, config).with_context(where + ": field '" + name + "'");
}

Status parse_official(const json& j, ModelConfig& config) {
  for (const auto& [name, value] : j.items()) {
    DI_RETURN_IF_ERROR(apply_field(name, value, config, "config.json"));
  }
  return Status();
}

Status parse_hf_text(const json& t, ModelConfig& config) {
  const auto& names = hf_text_names();
  for (const auto& [name, value] : t.items()) {
    auto it = names.find(name);
    if (it == names.end()) return invalid_argument("text_config: unknown field '" + name + "'");
    if (!it->second.empty()) {
      DI_RETURN_IF_ERROR(apply_field(it->second, value, config, "text_config (" + name + ")"));
    }
  }
  if (t.contains("num_key_value_heads") && t["num_key_value_heads"] != 1) {
    return invalid_argument("text_config: num_key_value_heads must be 1 (shared K=V latent)");
  }
  if (t.contains("hidden_act") && t["hidden_act"] != "silu") {
    return invalid_argument("text_config: hidden_act must be \"silu\"");
  }
  if (t.contains("rope_scaling") && !t["rope_scaling"].is_null()) {
    const json& rs = t["rope_scaling"];
    if (!rs.is_object()) return invalid_argument("text_config: rope_scaling must be an object");
    for (const auto& [name, value] : rs.items()) {
      if (name == "rope_type" || name == "type") {
        if (value != "yarn")
          return invalid_argument("text_config.rope_scaling: only yarn is supported");
      } else if (name == "factor") {
        DI_RETURN_IF_ERROR(apply_field("rope_factor", value, config, "rope_scaling.factor"));
      } else if (name == "beta_fast" || name == "beta_slow") {
        DI_RETURN_IF_ERROR(apply_field(name, value, config, "rope_scaling." + name));
      } else if (name == "original_max_position_embeddings") {
        DI_RETURN_IF_ERROR(apply_field("original_seq_len", value, config, "rope_scaling." + name));
      } else if (name != "mscale" && name != "mscale_all_dim") {
        return invalid_argument("text_config.rope_scaling: unknown field '" + name + "'");
      }
    }
  }
  return Status();
}

Status parse_hf(const json& j, ModelConfig& config) {
  for (const auto& [name, value] : j.items()) {
    if (!hf_top_level_names().count(name)) {
      return invalid_argument("config.json: unknown top-level field '" + name + "'");
    }
  }
  if (!j["text_config"].is_object())
    return invalid_argument("config.json: text_config must be an object");
  DI_RETURN_IF_ERROR(parse_hf_text(j["text_config"], config));
  if (j.contains("image_token_id")) {
    DI_RETURN_IF_ERROR(apply_field("image_token_id", j["image_token_id"], config, "config.json"));
  }
  if (j.contains("quantization_config")) {
    const json& q = j["quantization_config"];
    if (!q.is_object()) return invalid_argument("quantization_config must be an object");
    if (q.value("quant_method", "fp8") != "fp8") {
      return invalid_argument("quantization_config.quant_method must be \"fp8\"");
    }
    if (q.contains("weight_block_size") && q["weight_block_size"] != json::array({32, 32})) {
      return invalid_argument("quantization_config.weight_block_size must be [32, 32]");
    }
    if (q.value("scale_fmt", "ue8m0") != "ue8m0") {
      return invalid_argument("quantization_config.scale_fmt must be \"ue8m0\"");
    }
    config.dtype = "fp8";
    config.expert_dtype = q.value("expert_dtype", "fp4");
  } else {
    config.dtype = "bf16";
    config.expert_dtype = "";
  }
  if (j.contains("vision_config") && j["vision_config"].is_object()) {
    config.vision_n_layers = j["vision_config"].value("num_hidden_layers", 0);
  }
  return Status();
}

}  // namespace

Expected<ModelConfig> parse_model_config(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument("config.json is not a JSON object");
  }
  ModelConfig config;
  bool is_hf = j.contains("text_config");
  // The parsers check types before reading, but a lookup with a default (json::value) still
  // throws when the field holds another type: whatever the file holds is an error, not an abort.
  try {
    DI_RETURN_IF_ERROR(is_hf ? parse_hf(j, config) : parse_official(j, config));
  } catch (const json::exception& e) {
    return invalid_argument(std::string("config.json: ") + e.what());
  }
  DI_RETURN_IF_ERROR(validate_config(config));
  return config;
}

Expected<ModelConfig> load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto config = parse_model_config(ss.str());
  if (!config) return config.status().with_context(path);
  return config;
}

std::string model_config_to_json(const ModelConfig& c) {
  json j = {
      {"max_seq_len", c.max_seq_len},
      {"dtype", c.dtype},
      {"expert_dtype", c.expert_dtype},
      {"vocab_size", c.vocab_size},
      {"dim", c.dim},
      {"moe_inter_dim", c.moe_inter_dim},
      {"n_layers", c.n_layers},
      {"n_mtp_layers", c.n_mtp_layers},
      {"n_heads", c.n_heads},
      {"n_routed_experts", c.n_routed_experts},
      {"n_shared_experts", c.n_shared_experts},
      {"n_activated_experts", c.n_activated_experts},
      {"score_func", c.score_func},
      {"gate_temp", c.gate_temp},
      {"norm_topk_prob", c.norm_topk_prob},
      {"route_scale", c.route_scale},
      {"swiglu_limit", c.swiglu_limit},
      {"q_lora_rank", c.q_lora_rank},
      {"head_dim", c.head_dim},
      {"rope_head_dim", c.rope_head_dim},
      {"norm_eps", c.norm_eps},
      {"o_groups", c.o_groups},
      {"o_lora_rank", c.o_lora_rank},
      {"window_size", c.window_size},
      {"compress_ratios", c.compress_ratios},
      {"kv_source_layers", c.kv_source_layers},
      {"index_source_layers", c.index_source_layers},
      {"compress_rope_theta", c.compress_rope_theta},
      {"original_seq_len", c.original_seq_len},
      {"rope_theta", c.rope_theta},
      {"rope_factor", c.rope_factor},
      {"beta_fast", c.beta_fast},
      {"beta_slow", c.beta_slow},
      {"index_n_heads", c.index_n_heads},
      {"index_head_dim", c.index_head_dim},
      {"index_topk", c.index_topk},
      {"candidate_source_layer", c.candidate_source_layer},
      {"candidate_topk_blocks", c.candidate_topk_blocks},
      {"candidate_block_size", c.candidate_block_size},
      {"hc_mult", c.hc_mult},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
      {"hc_eps", c.hc_eps},
      {"engram_layer_ids", c.engram_layer_ids},
      {"engram_num_embeddings", c.engram_num_embeddings},
      {"engram_max_ngram_size", c.engram_max_ngram_size},
      {"engram_vocab_size", c.engram_vocab_size},
      {"engram_n_heads", c.engram_n_heads},
      {"engram_head_dim", c.engram_head_dim},
      {"engram_pad_id", c.engram_pad_id},
      {"engram_compressed_vocab_size", c.engram_compressed_vocab_size},
      {"vision_n_layers", c.vision_n_layers},
      {"image_token_id", c.image_token_id},
      {"dspark_block_size", c.dspark_block_size},
      {"dspark_noise_token_id", c.dspark_noise_token_id},
      {"dspark_target_layer_ids", c.dspark_target_layer_ids},
      {"dspark_markov_rank", c.dspark_markov_rank},
      {"dspark_n_routed_experts", c.dspark_n_routed_experts},
      {"dspark_n_activated_experts", c.dspark_n_activated_experts},
  };
  return j.dump(4) + "\n";
}

}  // namespace di::model
