// The hyper-connection mixes' per-row tail (kernels::hc_mixes_token after the mix product) by one
// warp per row, for hc <= 4 (hc^2 + 2 hc <= 32 values: one lane each). hc_mixes.cu calls it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/ops.h"

namespace di::backend::cuda {

// Whether hc_mixes_warp takes this hc.
bool hc_mixes_warp_supports(int hc);

// sum_squares [rows] and raw [rows, (2+hc)*hc] as hc_mixes takes them (sum_squares not null).
cudaError_t hc_mixes_warp(const float* sum_squares,
                          const float* raw,
                          int64_t rows,
                          int64_t hc_dim,
                          const float* scale,
                          const float* base,
                          int hc,
                          int sinkhorn_iters,
                          float hc_eps,
                          float norm_eps,
                          HcCoefficients* out,
                          cudaStream_t s);

}  // namespace di::backend::cuda
