// Token sampling from fp32 logits: greedy at temperature 0, otherwise temperature, top-k, top-p
// and min-p filtering, then a draw from a counter-based generator keyed by (seed, stream,
// position), so a seeded request samples the same tokens alone, in any batch and in another run.
#pragma once

#include <cstdint>
#include <span>

#include "util/status.h"

namespace di::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

Status validate_sampling(const SamplingParams& p);

// A uniform double in [0, 1) from (seed, stream, position); stream separates choices (n > 1).
double counter_uniform(uint64_t seed, uint64_t stream, uint64_t position);

int32_t sample_token(std::span<const float> logits,
                     const SamplingParams& p,
                     uint64_t stream,
                     uint64_t position);

}  // namespace di::engine
