// The decode weight-streaming kernels (skinny FP8/FP4 GEMM, device-side routed experts) at
// DeepSeek-V4.1-Flash shapes against the byte floor measured in the same run.
#pragma once

#include "util/status.h"

namespace di::bench {

// Prints two markdown tables (dense projections by rows; routed experts by tokens).
Status run_decode_bench(bool quick);
// Only the routed-experts table; sweep: every tile variant too, else the default pick only.
// 1: all variants, 2: the picks, 3: one shape for a profiler, 4: the many-rows table alone
Status run_moe_bench(int mode, int variant = -1);
// The square FP8 GEMM at 1 and 8 rows, one plain launch each (for ncu).
Status run_profile_launches();

}  // namespace di::bench
