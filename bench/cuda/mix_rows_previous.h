// Session 7's hc_mix_rows kernel, the baseline of `cuda_kernels_bench --mix-rows`
// (mix_rows_previous.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace di::bench {

cudaError_t hc_mix_rows_previous(const float* x,
                                 int64_t rows,
                                 int64_t hc_dim,
                                 const float* fn,
                                 int mix,
                                 float* raw,
                                 float* sum_squares,
                                 cudaStream_t s);

}  // namespace di::bench
