// The small row kernels of a decode step (rms_norm, the mHC mixes, dense_staged) vs their byte
// floor, with an output hash per row (cuda_kernels_bench --small-ops).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "util/status.h"

namespace di::bench {

Status run_small_ops_bench();
// --latency-ops: the latency-bound row kernels at 1, 8, 64 rows next to their chain floor;
// `once` (--latency-once): one plain launch of each at one row, for a profiler.
Status run_latency_ops_bench(bool once = false);
// --mix-pipe: hc_mix_products at 1-64 rows, the staged kernel vs the pipelined one.
Status run_mix_pipe_bench();
// --mix-rows: hc_mix_rows at 65-16,384 rows, session 7's kernel vs the by-lane staged one.
Status run_mix_rows_bench();

// Shared by these benches: one launch i of a timed graph on stream s.
using Launch = std::function<cudaError_t(int, cudaStream_t)>;
// Microseconds per launch of a CUDA graph of `launches` calls fn(i), best of `reps` replays.
Expected<double> graph_us(int reps, const Launch& fn, int launches = 20);
// FNV-1a of `n` bytes at device address d (after a device sync).
Expected<uint64_t> device_hash(const void* d, size_t n);

}  // namespace di::bench
