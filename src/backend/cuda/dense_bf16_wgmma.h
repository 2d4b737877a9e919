// The tensor path's dense BF16 product on Hopper's wgmma (dense_bf16_wgmma.cu): the bits of
// dense_bf16_tc.cu's kernels for every output, for the shared-tile kernel's shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

// Whether the current device runs the kernel (sm_90).
bool dense_bf16_wgmma_available();

// y = x . w^T as dense_bf16_tc with `splits` K parts; the caller checks
// dense_bf16_tc_tiled_supports(w, groups) and x's 16-byte alignment. 64-row tiles up to 64 rows,
// 128-row ones above once they fill half the SMs (or always with `wide`); `drain` waits for each
// stage's wgmmas before the next barrier (the first version; same bits). cudaErrorNotSupported on
// other devices.
cudaError_t dense_bf16_wgmma(const uint16_t* x,
                             int64_t rows,
                             const DeviceWeight& w,
                             int groups,
                             int splits,
                             float* y,
                             bool round_bf16,
                             cudaStream_t s,
                             bool wide,
                             bool drain);

// The number of K parts (fresh MMA chains, added in part order) of every dense_bf16_tc kernel for
// weight w: one for the heads (>= kDenseTcTiledMinOutputs outputs, always on the shared-tile or
// wgmma kernels, whose parallelism does not come from K), else 4 (2) while the parts stay whole
// 32-wide chunks, which gives the row-group kernel's small batches four times the warps.
int dense_bf16_tc_k_parts(const DeviceWeight& w);

// --- Many rows, warp-specialised (dense_bf16_wgmma_ws.cu) ---
// The same bits as dense_bf16_tc (any K parts, groups as dense_bf16_tc_tiled_supports), from x
// in the k32-logical order (below): TMA tile loads, 128 features x 128 rows per CTA, or 256 rows
// for weights of one K part (the heads) above kDenseBf16WsMaxRows128 rows (tile_rows 128 or 256
// forces one, 0 picks). `linear` and `grouped_linear` take it from kDenseBf16WsMinRows rows for
// the heads (measured: 0.37 vs 0.59 ms at 96 rows, 0.44 vs 0.41 at 64), from
// kDenseBf16WsMinRowsParts for products of several K parts (wo_a: 0.042 vs 0.063 ms at 256 rows,
// 0.65 vs 0.97 at 4,096, a tie at 32-128).
inline constexpr int64_t kDenseBf16WsMinRows = 65;
inline constexpr int64_t kDenseBf16WsMinRowsParts = 129;
inline constexpr int64_t kDenseBf16WsMaxRows128 = 128;
bool dense_bf16_ws_supports(const DeviceWeight& w, int groups);  // sm_90, BF16, K % 64 == 0
bool dense_bf16_ws_applies(int64_t rows, const DeviceWeight& w, int groups);
cudaError_t dense_bf16_wgmma_ws(const uint16_t* x_logical,
                                int64_t rows,
                                const DeviceWeight& w,
                                int groups,
                                float* y,
                                bool round_bf16,
                                cudaStream_t s,
                                int tile_rows = 0);

// x [rows, k] (k % 32 == 0, 16-byte aligned) as bf16 in the k32-logical order: within each
// 32-wide chunk, the k pairs where the mma.sync kernels' k16 steps multiply them (the order of
// dense_bf16_wgmma.cu's B tile), so that tile loads need no permutation.
cudaError_t f32_to_bf16_k32_logical(
    const float* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s);
cudaError_t bf16_to_k32_logical(
    const uint16_t* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s);

}  // namespace di::backend::cuda
