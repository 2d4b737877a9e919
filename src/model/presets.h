// Built-in model configurations for `deepinfer init-model` (spec §5 and §1.1).
//  - mini: hidden 128 with every layer mode, Engram and DSpark layers, but the real vocabulary size
//    (129,280) so that it runs with DeepSeek's tokenizer;
//  - v41-shaped: every tensor at full V4.1-Flash width (hidden 5120, 64x512 heads, expert width
//    2304) with fewer layers and experts, for benchmarks.
#pragma once

#include <string>

#include "model/config.h"
#include "util/status.h"

namespace di::model {

struct PresetOptions {
  int num_layers = 0;       // 0: the preset's default
  int num_experts = 0;      // 0: the preset's default
  int num_mtp_layers = -1;  // -1: the preset's default
};

// A preset by name ("mini", "v41-shaped"); the Engram compressed vocabulary size is filled in
// later from the tokenizer the checkpoint ships.
Expected<ModelConfig> preset_config(const std::string& name, const PresetOptions& options);

// A layer schedule covering SWA, Full (ratio 2), Reuse, Full (ratio 1, candidate source), Reuse
// and Reindex, in that order, then alternating Reuse/Reindex; DSpark layers get ratio 0.
void apply_layer_schedule(ModelConfig& c, int num_layers, int num_mtp_layers);

}  // namespace di::model
