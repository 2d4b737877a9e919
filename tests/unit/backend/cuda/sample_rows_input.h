// The host inputs of Ops::sample_rows held in vectors (the sampling tests build them row by row
// and hand the backends a RowsArgs view).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ref/sample_math.h"
#include "kernels/ref/sample_row.h"

namespace di::backend::testing {

struct SampleRowsInput {
  std::vector<kernels::sample::RowParams> params;
  std::vector<int32_t> penalty_tokens, penalty_counts, bias_tokens;
  std::vector<float> bias_values;
  std::vector<uint32_t> masks;  // mask_words(cols) per masked row
  kernels::sample::RowsArgs args(int64_t cols) const {
    kernels::sample::RowsArgs a;
    a.params = params.data();
    a.penalty_tokens = penalty_tokens.data();
    a.penalty_counts = penalty_counts.data();
    a.num_penalties = static_cast<int64_t>(penalty_tokens.size());
    a.bias_tokens = bias_tokens.data();
    a.bias_values = bias_values.data();
    a.num_bias = static_cast<int64_t>(bias_tokens.size());
    a.masks = masks.data();
    a.num_masks = static_cast<int64_t>(masks.size()) / kernels::sample::mask_words(cols);
    return a;
  }
};

}  // namespace di::backend::testing
