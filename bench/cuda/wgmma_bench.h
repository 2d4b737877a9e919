// The sm_90a wgmma FP8 GEMMs (gemm_wgmma_bf16.cu, gemm_wgmma.cu) at DeepSeek-V4.1-Flash prefill
// shapes, next to the mma.sync kernels and cuBLASLt's per-tensor FP8 GEMM (kernels_bench.cc calls
// it).
#pragma once

#include "util/status.h"

namespace di::bench {

// fp8_flops and bytes_per_s: the peaks kernels_bench measured in the same run (floors divide by
// them). Prints a markdown table; quick runs fewer shapes.
Status bench_wgmma_gemms(double fp8_flops, double bytes_per_s, bool quick);

}  // namespace di::bench
