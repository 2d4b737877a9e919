// CudaOps' KV-cache ops: write_kv (the generic codec, kv_cache_codec.h) and kv_attention. At
// V4.1's shape (64 heads x 512) kv_attention runs the tensor-core kernel over the stored rows
// (sparse_attention_fp8.h: within a tolerance of the CPU); elsewhere (the golden mini models) it
// decodes every key slot's row to fp32 and runs the exact fp32 attention kernel, bitwise equal to
// the CPU backend. The index lists are device memory (built by the device top-k and paged_rows).
#include <cstdint>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_key_table.h"

namespace di::backend {

namespace {

bool tensor_core_shape(const KvAttentionArgs& a) {
  return a.num_heads == cuda::kAttnHeads && a.head_dim == cuda::kKvDim &&
         static_cast<int64_t>(a.num_window) + a.num_compressed <= cuda::kAttnMaxKeys &&
         a.window_pool_rows < 0x7fffffff;
}

// Whether the seesaw kernel's gather mode pays (given that the seesaw kernel runs) and its row
// bounds are known and in range.
bool gather_pays(const KvAttentionArgs& a) {
  constexpr int64_t kMaxRows = int64_t{1} << 30;
  return a.distinct_rows < kMaxRows && a.window_pool_rows + a.num_queries < kMaxRows &&
         (a.num_compressed == 0 ||
          (a.compressed_pool_rows > 0 && a.compressed_pool_rows < kMaxRows)) &&
         cuda::sparse_attention_gather_pays(a.num_queries, a.num_window + a.num_compressed,
                                            a.distinct_rows);
}

}  // namespace

void CudaOps::write_kv(ConstRowsView rows,
                       KvFormat format,
                       const int32_t* slots,
                       uint8_t* pool) const {
  Impl& m = *impl_;
  m.run("write_kv", [&]() -> Status {
    const int32_t* ds = nullptr;
    if (slots) {
      DI_ASSIGN_OR_RETURN(ds, m.upload(slots, static_cast<size_t>(rows.rows)));
    }
    DI_CUDA_RETURN_IF_ERROR(cuda::write_kv_rows(rows.data, rows.rows, static_cast<int>(rows.cols),
                                                format, ds, pool, m.stream));
    return {};
  });
}

void CudaOps::kv_attention(const KvAttentionArgs& a) const {
  Impl& m = *impl_;
  m.run("kv_attention", [&]() -> Status {
    if (a.num_queries == 0) return {};
    DI_ASSIGN_OR_RETURN(const float* ds, m.constant(a.sink, a.num_heads));
    const size_t qn = static_cast<size_t>(a.num_queries * a.num_heads * a.head_dim);
    if (tensor_core_shape(a)) {
      cuda::SparseAttentionFp8Args f;
      DI_ASSIGN_OR_RETURN(uint16_t * qb, m.scratch<uint16_t>(qn));
      DI_CUDA_RETURN_IF_ERROR(cuda::f32_to_bf16_bits(a.q, static_cast<int64_t>(qn), qb, m.stream));
      f.q = qb;
      f.num_queries = a.num_queries;
      f.kv = a.window_pool;
      f.fresh_kv = a.fresh;
      f.fresh_from = static_cast<int32_t>(a.window_pool_rows);
      f.num_indices = a.num_window;
      f.extra_kv = a.compressed_pool;
      f.num_extra = a.num_compressed;
      if (a.num_window > 0) f.indices = a.window_index;
      if (a.num_compressed > 0) f.extra_indices = a.compressed_index;
      f.sink = ds;
      f.softmax_scale = a.softmax_scale;
      // The seesaw kernel writes the floats itself; the others write bf16, widened after them.
      f.out_f32 = a.out;
      const bool seesaw = cuda::sparse_attention_seesaw_runs(f);
      uint16_t* ob = nullptr;
      if (!seesaw) {
        DI_ASSIGN_OR_RETURN(ob, m.scratch<uint16_t>(qn));
        f.out_f32 = nullptr;
        f.out = ob;
      }
      // Small batches take the split path (same bits) when its workspace fits in the arena.
      if (a.num_queries <= cuda::kAttnSplitMaxQueries) {
        const size_t wb = cuda::sparse_attention_fp8_workspace_bytes(
            a.num_queries, static_cast<int64_t>(a.num_window) + a.num_compressed);
        if (Expected<uint8_t*> ws = m.scratch<uint8_t>(wb)) {
          f.workspace = *ws;
          f.workspace_bytes = wb;
        }
      }
      // Queries that share their keys (a prefill) decode each distinct row once into a table
      // that the kernel copies from (sparse_attention_key_table.h: the same bits).
      if (seesaw && gather_pays(a)) {
        const cuda::SparseAttentionKeyTableShape shape{
            a.window_pool_rows + (a.fresh ? a.num_queries : 0),
            a.num_compressed > 0 ? a.compressed_pool_rows : 0, a.distinct_rows};
        const size_t wb = cuda::sparse_attention_key_table_bytes(f, shape);
        if (Expected<uint8_t*> ws = m.scratch<uint8_t>(wb)) {
          DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention_key_table(f, shape, *ws, wb, m.stream));
        }
      }
      DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention_fp8(f, m.stream));
      if (ob) {
        DI_CUDA_RETURN_IF_ERROR(
            cuda::bf16_bits_to_f32(ob, static_cast<int64_t>(qn), a.out, m.stream));
      }
      return {};
    }
    // Exact path: every key slot's row decoded to fp32 (windows, then compressed rows), then the
    // fp32 kernel over slot indices. The index lists stay on the device (they may come from the
    // device top-k); the table is small at the shapes that take this path (the golden minis).
    const int64_t nw = a.num_queries * a.num_window, nc = a.num_queries * a.num_compressed;
    DI_ASSIGN_OR_RETURN(float* table,
                        m.scratch<float>(static_cast<size_t>((nw + nc) * a.head_dim)));
    const int64_t n_keys = static_cast<int64_t>(a.num_window) + a.num_compressed;
    DI_ASSIGN_OR_RETURN(int32_t * di,
                        m.scratch<int32_t>(static_cast<size_t>(a.num_queries * n_keys)));
    DI_CUDA_RETURN_IF_ERROR(cuda::kv_table_slots(a.window_index, a.num_window, a.compressed_index,
                                                 a.num_compressed, a.num_queries, di, m.stream));
    if (nw > 0) {
      DI_CUDA_RETURN_IF_ERROR(cuda::decode_kv_rows_f32(a.window_pool, a.window_pool_rows, a.fresh,
                                                       KvFormat::kFp8, a.head_dim, a.window_index,
                                                       nw, table, m.stream));
    }
    if (nc > 0) {
      DI_CUDA_RETURN_IF_ERROR(cuda::decode_kv_rows_f32(
          a.compressed_pool, INT64_MAX, nullptr, KvFormat::kFp4, a.head_dim, a.compressed_index, nc,
          table + nw * a.head_dim, m.stream));
    }
    DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention(a.q, a.num_queries, a.num_heads, a.head_dim,
                                                   table, di, n_keys, ds, a.softmax_scale, a.out,
                                                   m.stream));
    return {};
  });
}

}  // namespace di::backend
