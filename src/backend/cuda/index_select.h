// The indexer's selections on the device (Ops::index_topk, candidate_blocks, paged_rows), with
// exactly kernels/ref/index_select.h's choices: a radix select of the k-th largest score per row
// (one CTA per row, four 8-bit passes over order-preserving keys), then a compaction in index
// order that takes every larger score and the lowest-indexed equal ones. A row's result depends
// on that row only. Every pointer is device memory; launchers only enqueue work on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda {

// selected[t, :] = the min(topk, visible[t]) best of scores[t, 0 .. visible[t]) (ties: lower
// index) in ascending order, then -1 up to width. With blocks ([rows, num_blocks] ascending
// block ids, -1 padded), entries whose block e / block_size is not listed score -inf.
cudaError_t index_topk(const float* scores,
                       int64_t rows,
                       int64_t num_keys,
                       const int64_t* visible,
                       int topk,
                       const int32_t* blocks,
                       int num_blocks,
                       int block_size,
                       int32_t* selected,
                       int width,
                       cudaStream_t stream);

// Scratch floats candidate_blocks needs: the block maxima of every row.
int64_t candidate_blocks_scratch(int64_t rows, int64_t num_keys, int block_size);

// blocks[t, :] = select_candidate_blocks of row t, then -1 up to width.
cudaError_t candidate_blocks(const float* scores,
                             int64_t rows,
                             int64_t num_keys,
                             const int64_t* visible,
                             int block_size,
                             int topk_blocks,
                             float* scratch,
                             int32_t* blocks,
                             int width,
                             cudaStream_t stream);

// out[r, j] = pages[page_offset[r] + e / per] * per + e % per for e = entries[r, j] >= 0, else -1.
cudaError_t paged_rows(const int32_t* entries,
                       int64_t rows,
                       int width,
                       const int32_t* pages,
                       const int64_t* page_offset,
                       int entries_per_page,
                       int32_t* out,
                       cudaStream_t stream);

// out[r] = the first index of the largest value of row r (std::max_element; no NaN) (greedy
// sampling): one CTA per row, or for long rows (>= 4 chunks of 4,096) a CTA per chunk and a
// combine; `work` (8-byte aligned) holds argmax_work_bytes(rows, cols) bytes (0: may be null).
size_t argmax_work_bytes(int64_t rows, int64_t cols);
cudaError_t argmax_rows(
    const float* x, int64_t rows, int64_t cols, int32_t* out, void* work, cudaStream_t stream);

}  // namespace di::backend::cuda
