// `cuda_kernels_bench --dense-f32`: the dense products with fp32 activations and BF16/F32 weights
// on CUDA cores (the compressor's wkv/wgate, the indexer's projections, hc_mixes' fn, the grouped
// wo_a on the exact path) at 1-4096 rows: the eight-lane kernel (dense_gemm) and the shared-memory
// one (dense_staged) next to the register-tiled dense_tiled (auto and every tile), against floors
// measured in the same run (dense_f32_bench.cc). Returns the process exit code.
#pragma once

namespace di::bench {

int dense_f32_bench();

}  // namespace di::bench
