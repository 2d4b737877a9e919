// The tensor path's FP8 products for a few rows (decode), bit for bit the bf16 wgmma kernel's
// (gemm_wgmma_bf16.cu): see gemm_bf16_decode.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

// Rows the decode kernel takes (one m16n8k16 column group of tokens).
constexpr int64_t kBf16DecodeMaxRows = 8;

// Whether block_scaled_gemm_bf16_decode takes this product: 1..8 rows and a weight the bf16 wgmma
// kernel takes (wgmma_bf16_applies: FP8, K % 128 == 0, sm_90), in its lane-order layout.
bool bf16_decode_applies(int64_t rows, const DeviceWeight& w);

// y [rows, N] = the block-scaled product of quantize_fp8_bf16's xb [rows, K] and the weight in
// wgmma_bf16_permute's layout: the same bits as block_scaled_gemm_wgmma_bf16 for every row.
// `variant` only changes how the work is spread: 1 or 2 = 8 or 16 warps per CTA over all of K;
// 3 = K split over a cluster of CTAs per feature tile; 4 = 3 held to 64 registers (4 CTAs per
// SM); 0 picks.
inline constexpr int kBf16DecodeVariants = 4;
cudaError_t block_scaled_gemm_bf16_decode(const uint16_t* xb,
                                          int64_t rows,
                                          const DeviceWeight& w,
                                          float* y,
                                          cudaStream_t s,
                                          int variant = 0);

// Two products of the same K that read the same xb (a gate and an up projection, or wq_a and
// wkv) in one launch: each output's bits are those of block_scaled_gemm_bf16_decode on its own
// weight. `variant` as there (0 picks by the two products' tiles together).
cudaError_t block_scaled_gemm_bf16_decode_pair(const uint16_t* xb,
                                               int64_t rows,
                                               const DeviceWeight& w0,
                                               float* y0,
                                               const DeviceWeight& w1,
                                               float* y1,
                                               cudaStream_t s,
                                               int variant = 0);

// Whether CudaOps takes the decode kernel for this product (where it is the faster of the two),
// for a weight wgmma_bf16_applies already accepted (the device is not queried again).
bool bf16_decode_preferred(int64_t rows, const DeviceWeight& w);

}  // namespace di::backend::cuda
