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

}  // namespace di::backend::cuda
