// The decode weight-streaming kernels (skinny FP8/FP4 GEMM, device-side routed experts) at
// DeepSeek-V4.1-Flash shapes against the byte floor measured in the same run.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "util/status.h"

namespace di::bench {

// Microseconds per launch: a graph of kGraphLaunches calls fn(i), replayed after one warm-up
// replay; the best of `reps` replays (launch gaps as a captured decode step has them).
inline constexpr int kGraphLaunches = 20;
Expected<double> graph_us(int reps, const std::function<cudaError_t(int, cudaStream_t)>& fn);

// The batch-1 step's FP8 products (wq_b, wo_b, the shared w2, Engram, DSpark, ...) at 1 and 8
// rows on every few-row variant, act_quant included (few_rows_bench.cc). profile: one plain
// launch of each variant at one row instead, for ncu.
Status run_few_rows_bench(bool profile);

// Prints two markdown tables (dense projections by rows; routed experts by tokens).
Status run_decode_bench(bool quick);
// Only the routed-experts table; sweep: every tile variant too, else the default pick only.
// 1: all variants, 2: the picks, 3: one shape for a profiler, 4: the many-rows table alone
Status run_moe_bench(int mode, int variant = -1);
// The square FP8 GEMM at 1 and 8 rows, one plain launch each (for ncu).
Status run_profile_launches();

}  // namespace di::bench
