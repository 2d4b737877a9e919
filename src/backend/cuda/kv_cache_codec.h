// The KV cache's stored formats (backend/kv_format.h) at any head_dim (a multiple of 32) on the
// device: fp32 rows in, fp32 rows out, bitwise the reference codecs (kernels/ref/kv_codec.h). The
// CUDA backend's write_kv and its exact kv_attention path (decode, then the fp32 attention kernel)
// use them; the 64 x 512 tensor-core path reads the stored rows itself (sparse_attention_fp8.h).
// Every pointer is device memory; launchers only enqueue work on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/kv_format.h"

namespace di::backend::cuda {

// Encodes rows [num_rows, dim] (bf16-exact fp32) into pool rows slots[r] (skipped when -1; row r
// when slots is null), rows at kv_row_stride(format, dim).
cudaError_t write_kv_rows(const float* rows,
                          int64_t num_rows,
                          int dim,
                          KvFormat format,
                          const int32_t* slots,
                          uint8_t* pool,
                          cudaStream_t stream);

// out [num_rows, dim] = the decoded rows index[r]: i < pool_rows reads pool row i, i >= pool_rows
// reads fresh row i - pool_rows; -1 gives zeros.
cudaError_t decode_kv_rows_f32(const uint8_t* pool,
                               int64_t pool_rows,
                               const uint8_t* fresh,
                               KvFormat format,
                               int dim,
                               const int32_t* index,
                               int64_t num_rows,
                               float* out,
                               cudaStream_t stream);

// The exact attention path's key slots over a table of decoded rows laid out as every query's
// window rows [num_queries * num_window] then every query's compressed rows: slot[t, j] is that
// table row of key j of query t, or -1 where window_index / compressed_index hold -1.
cudaError_t kv_table_slots(const int32_t* window_index,
                           int num_window,
                           const int32_t* compressed_index,
                           int num_compressed,
                           int64_t num_queries,
                           int32_t* slot,
                           cudaStream_t stream);

// Exact conversions between bf16-exact fp32 and bf16 bits (the tensor-core attention's q and out).
cudaError_t f32_to_bf16_bits(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);
cudaError_t bf16_bits_to_f32(const uint16_t* x, int64_t n, float* out, cudaStream_t stream);

}  // namespace di::backend::cuda
