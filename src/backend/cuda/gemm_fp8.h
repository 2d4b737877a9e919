// The `--cuda-gemm fp8` prefill GEMM (gemm_fp8.cu): the numerics and bits of
// block_scaled_gemm_wgmma (kernels.h), on a persistent grid with longer straight-line bodies
// (docs/notes/cuda-kernels.md, "pgemm3"). sm_90a only; the launchers refuse other devices.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

// One configuration by number (0..kFp8Variants-1: 128 x 128 tiles with two block-sum sets, bodies
// of 1, 2, 2 or 4 stages, 5, 5, 4 or 4 stages in the ring; 192 x 64; 128 x 96 with three sets),
// all the bits of block_scaled_gemm_wgmma. y = the block-scaled product of quantize_fp8_e4m3's
// qa / scales and w (FP8), bf16 values. cudaErrorNotSupported where wgmma_gemm_applies is false.
inline constexpr int kFp8Variants = 6;
cudaError_t block_scaled_gemm_fp8(int variant,
                                  const uint8_t* qa,
                                  const float* scales,
                                  int64_t rows,
                                  const DeviceWeight& w,
                                  float* y,
                                  cudaStream_t s);

// The configuration the kFp8 path runs above 64 rows for a K (fastest on the H200,
// docs/benchmarks.md "pgemm3": four-stage bodies from K = 2048, one-stage ones below, where the
// four-stage one lost 14 % on wq_b at 16,384 rows).
inline int fp8_mode_variant(int64_t in_features) {
  return in_features >= 2048 ? 3 : 0;
}

}  // namespace di::backend::cuda
