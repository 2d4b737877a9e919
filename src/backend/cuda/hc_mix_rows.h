// The hyper-connection mix products for many rows (hc_mix_rows.cu): raw[r, o] = dot_f32(x[r],
// fn[o]) for o < mix and sum_squares[r] = dot_f32(x[r], x[r]), in the CPU's lane order.
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
                        float* sum_squares,
                        cudaStream_t s);

}  // namespace di::backend::cuda
