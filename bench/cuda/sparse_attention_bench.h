// `cuda_kernels_bench --sparse-attention`: the FP8/FP4 KV-cache attention kernel against its
// measured floors (sparse_attention_bench.cc); `profile`: two cases only, for ncu. Returns the
// process exit code.
#pragma once

namespace di::bench {

int sparse_attention_bench(bool profile);

}  // namespace di::bench
