// `cuda_kernels_bench --dense-tc`: the tensor path's dense BF16 products (the head 129,280 x 5,120
// and the grouped wo_a, 8 x 1024 x 4096) with both kernels of dense_bf16_tc.cu against their
// measured floors (dense_tc_bench.cc). Returns the process exit code.
#pragma once

namespace di::bench {

int dense_tc_bench();

}  // namespace di::bench
