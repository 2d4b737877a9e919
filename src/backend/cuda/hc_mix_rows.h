// The hyper-connection mix products for many rows (hc_mix_rows.cu): raw[r, o] = dot_f32(x[r],
// fn[o]) for o < mix and sum_squares[r] = dot_f32(x[r], x[r]), in the CPU's lane order. Also any
// dense product of few fp32 outputs at many rows (`linear`'s router and indexer products, with fn
// the weight widened to fp32, sum_squares null, raw optionally rounded to bf16): the same bits as
// dense_staged and dense_tiled.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda {

// Whether hc_mix_rows takes `mix` products (a block runs 8 threads per output).
bool hc_mix_rows_supports(int mix);

cudaError_t hc_mix_rows(const float* x,
                        int64_t rows,
                        int64_t hc_dim,
                        const float* fn,
                        int mix,
                        float* raw,
                        float* sum_squares,  // or nullptr: no sums of squares
                        bool round_out,      // raw rounded to bf16 (as `linear`'s round)
                        cudaStream_t s);

}  // namespace di::backend::cuda
