// Ops::sample_rows' kernel at the V4.1 vocabulary (129,280) against its byte floor, batch 1 to
// 256, per sampling mode (cuda_kernels_bench --sample-rows).
#pragma once

#include "util/status.h"

namespace di::bench {

Status run_sample_bench();

}  // namespace di::bench
