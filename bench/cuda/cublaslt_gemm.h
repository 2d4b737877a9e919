// cuBLASLt reference GEMMs for the kernel benchmark: D[m, n] = A[k, m]^T . B[k, n] in bf16 or
// fp8 e4m3 (fp32 accumulation; bf16 output). These give the measured peak that FLOP floors
// divide by, and the side-by-side time for our GEMM shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "util/status.h"

namespace di::bench {

// kFP8: one per-tensor scale (1.0). kFP8Block128: DeepSeek-V3-style block scales, A (the weights)
// one fp32 scale per 128 x 128 block, B (the activations) one per 128 values along k
// (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F / VEC128_32F, cuBLAS 12.9+ on sm_90).
enum class LtType { kBF16, kFP8, kFP8Block128 };

// Mean milliseconds of one product over `iters` runs after warm-up; A and B are filled with
// small random values. Returns a Status when cuBLASLt has no algorithm for the shape.
Expected<double> time_cublaslt_gemm(LtType type, int64_t m, int64_t n, int64_t k, int iters);

// The floors' denominators, measured now: device copy bandwidth (bytes read + written per
// second, a 1 GiB cudaMemcpy) and cuBLASLt's bf16 rate at 8192^3.
struct MeasuredPeaks {
  double bytes_per_s = 0, bf16_flops = 0;
};
Expected<MeasuredPeaks> measure_copy_and_bf16_peaks();
// The copy bandwidth alone (the byte floors' denominator).
Expected<double> measure_copy_bytes_per_s();

}  // namespace di::bench
