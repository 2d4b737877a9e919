// The small row kernels of a decode step (rms_norm, the mHC mixes, dense_staged) vs their byte
// floor, with an output hash per row (cuda_kernels_bench --small-ops).
#pragma once

#include "util/status.h"

namespace di::bench {

Status run_small_ops_bench();
// --latency-ops: the latency-bound row kernels at 1, 8, 64 rows next to their chain floor.
Status run_latency_ops_bench();

}  // namespace di::bench
