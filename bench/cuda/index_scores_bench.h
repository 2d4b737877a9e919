// `cuda_kernels_bench --index-scores`: the indexer's scores on tensor cores and CUDA cores against
// their measured floors (index_scores_bench.cc). Returns the process exit code.
#pragma once

namespace di::bench {

int index_scores_bench();

}  // namespace di::bench
