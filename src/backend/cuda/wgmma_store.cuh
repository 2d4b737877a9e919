// The epilogue of the FP8 wgmma GEMMs (gemm_wgmma.cu, gemm_fp8.cu): a consumer thread's
// m64nBN accumulator fragment, rounded to bf16 values, into y [rows, N] (fp32), two columns at
// a time where N allows.
#pragma once

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"

namespace di::backend::cuda::wg {

// acc[4 j + 2 h + e]: row m_lo + 8 h, column ncol + 8 j + e (the wgmma D layout).
template <int BN>
__device__ __forceinline__ void store_rows_bf16(
    const float (&acc)[BN / 2], int m_lo, int ncol, int rows, int N, float* y) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m_lo + 8 * h, n = ncol + 8 * j;
      if (m >= rows || n >= N) continue;
      float* dst = y + static_cast<int64_t>(m) * N + n;
      const float v0 = round_bf16(acc[4 * j + 2 * h]), v1 = round_bf16(acc[4 * j + 2 * h + 1]);
      if (n + 1 < N && N % 2 == 0) {
        *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
      } else {
        dst[0] = v0;
        if (n + 1 < N) dst[1] = v1;
      }
    }
  }
}

}  // namespace di::backend::cuda::wg
