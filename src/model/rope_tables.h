// Rotary frequencies of the two layer kinds (spec §1.3 step 2; reference precompute_freqs_cis):
// ratio-0 layers use rope_theta without YaRN; ratio > 0 layers, their compressed entries and their
// indexer use compress_rope_theta with YaRN (no mscale).
#pragma once

#include "backend/ops.h"
#include "model/config.h"

namespace di::model {

backend::RopeTable make_rope_table(
    int rope_dim, float base, int original_seq_len, float factor, int beta_fast, int beta_slow);

// The table a layer uses, by its compress ratio.
backend::RopeTable rope_table_for_layer(const ModelConfig& config, int layer);

}  // namespace di::model
