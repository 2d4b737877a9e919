// The Engram hash multipliers: odd random int64s per (layer, look-back), drawn exactly as
// the reference draws them with numpy, because the checkpoint's tables were trained on
// the rows those multipliers select.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace di::engram {

// values = np.random.default_rng(10007 * layer_id).integers(
//     0, max(1, (INT64_MAX // compressed_vocab_size) // 2), size=max_ngram_size, dtype=int64)
// returned as values * 2 + 1. The bound keeps token * multiplier inside int64 for every
// compressed token id.
Expected<std::vector<int64_t>> hash_multipliers(int64_t layer_id,
                                                int32_t max_ngram_size,
                                                int64_t compressed_vocab_size);

// hash_multipliers for each layer id, in order: result[layer][look_back].
Expected<std::vector<std::vector<int64_t>>> hash_multipliers_for_layers(
    const std::vector<int64_t>& layer_ids, int32_t max_ngram_size, int64_t compressed_vocab_size);

}  // namespace di::engram
