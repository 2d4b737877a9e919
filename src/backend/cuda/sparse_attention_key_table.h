// The gather mode of the warp-specialised sparse attention kernel (sparse_attention_seesaw.cu).
// In a prefill the queries share their keys: query t's window is positions t - 127 .. t, and its
// selected compressed entries come from one sequence's few thousand. The default kernel loads and
// decodes every key of every query (a 4,096-token prefill decodes 2.6 M rows for ~7 K distinct
// ones), and its producer warps' decoding set its pace (docs/notes/cuda-kernels.md, sessions
// 16-21). Here each distinct stored row is decoded once into a bf16 table, and the producers copy
// table rows into the key tiles with cp.async. The table holds exactly the words the producers
// would have decoded (the same decoders), so the output bits are the same (tested).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

struct SparseAttentionKeyTableShape {
  // Every window index is below window_rows (the pool's rows, then the fresh rows), every
  // compressed index below extra_rows; both below 2^30. An index outside is an empty slot.
  int64_t window_rows = 0;
  int64_t extra_rows = 0;
  // Table rows for distinct stored rows (a guess: the rows past it are decoded by the producers
  // from the pool, as in the default mode: slower, the same bits).
  int64_t capacity = 0;
};

// Device scratch for sparse_attention_key_table.
size_t sparse_attention_key_table_bytes(const SparseAttentionFp8Args& a,
                                        const SparseAttentionKeyTableShape& s);

// Builds the key table of a's lists in `workspace` (bytes >= sparse_attention_key_table_bytes)
// and points a.key_table and a.key_rows at it. key_rows[t][j] for j < num_indices + num_extra:
// 0 for an empty slot (table row 0 is zeros), the table row (>= 1) of a placed row, or
// ~(index | format << 30) (format 1: compressed) for a row past the capacity. Four kernels
// on `stream`: clear the row map, mark the rows (one atomicCAS a key, a counter hands out table
// rows in no fixed order, which changes no value), decode them, write key_rows.
// cudaErrorInvalidValue for shapes the kernel would refuse or the bounds above.
cudaError_t sparse_attention_key_table(SparseAttentionFp8Args& a,
                                       const SparseAttentionKeyTableShape& s,
                                       void* workspace,
                                       size_t bytes,
                                       cudaStream_t stream);

// Whether a call of this many queries and distinct rows pays for the gather mode, when the seesaw
// kernel runs it (sparse_attention_seesaw_runs): each distinct row is read by at least
// kAttnGatherMinReuse queries on average.
inline constexpr int64_t kAttnGatherMinReuse = 4;
inline bool sparse_attention_gather_pays(int64_t num_queries, int num_keys, int64_t distinct_rows) {
  return distinct_rows > 0 && distinct_rows * kAttnGatherMinReuse <= num_queries * num_keys;
}

}  // namespace di::backend::cuda
