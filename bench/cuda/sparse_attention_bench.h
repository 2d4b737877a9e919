// `cuda_kernels_bench --sparse-attention`: the FP8/FP4 KV-cache attention kernel against its
// measured floors (sparse_attention_bench.cc); kProfile (`--sparse-attention-profile`): a few
// calls of a few cases, for ncu; kSequencePrefill (`--sparse-attention-prefill`): the
// one-sequence prefill table alone. Returns the process exit code.
#pragma once

#include <cstdint>

#include "backend/cuda/sparse_attention_fp8.h"
#include "util/status.h"

namespace di::bench {

enum class AttentionBench { kAll, kProfile, kSequencePrefill };
int sparse_attention_bench(AttentionBench what);

// The one-sequence prefill case (sparse_attention_prefill_bench.cc) over the given pools: the
// default seesaw kernel against its gather mode, with the floor from the measured rates.
// `profile`: two calls of each mode, no table.
Status sequence_prefill_case(const uint8_t* kv,
                             int64_t kv_rows,
                             const uint8_t* extra_kv,
                             int64_t extra_rows,
                             double bytes_per_s,
                             double bf16_flops,
                             bool profile);

// Runs `seesaw` once on the seesaw kernel with its timeline (args.ablate bit 6; in gather mode when
// its key table is set) and prints the events of block 7's first queries, one line each.
Status print_seesaw_timeline(backend::cuda::SparseAttentionFp8Args seesaw);

}  // namespace di::bench
