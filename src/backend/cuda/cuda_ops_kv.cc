// CudaOps' KV-cache ops: write_kv (the generic codec, kv_cache_codec.h) and kv_attention. At
// V4.1's shape (64 heads x 512) kv_attention runs the tensor-core kernel over the stored rows
// (sparse_attention_fp8.h: within a tolerance of the CPU); elsewhere (the golden mini models) it
// decodes the distinct rows a call reads to fp32 and runs the exact fp32 attention kernel,
// bitwise equal to the CPU backend.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend {

namespace {

bool tensor_core_shape(const KvAttentionArgs& a) {
  return a.num_heads == cuda::kAttnHeads && a.head_dim == cuda::kKvDim &&
         static_cast<int64_t>(a.num_window) + a.num_compressed <= cuda::kAttnMaxKeys &&
         a.window_pool_rows < 0x7fffffff;
}

// The distinct rows a call reads, in first-use order, and each slot's row in that list.
struct DistinctRows {
  std::vector<int32_t> window, compressed;  // pool indices (window: its two-array space)
  std::vector<int32_t> slot;                // [num_queries, num_keys]; -1 = empty
};

DistinctRows distinct_rows(const KvAttentionArgs& a) {
  DistinctRows d;
  const int64_t n_keys = static_cast<int64_t>(a.num_window) + a.num_compressed;
  d.slot.assign(static_cast<size_t>(a.num_queries * n_keys), -1);
  std::unordered_map<int32_t, int32_t> win_of, comp_of;
  for (int64_t t = 0; t < a.num_queries; ++t) {
    for (int64_t j = 0; j < a.num_window; ++j) {
      const int32_t i = a.window_index[t * a.num_window + j];
      if (i < 0) continue;
      auto [it, fresh] = win_of.emplace(i, static_cast<int32_t>(d.window.size()));
      if (fresh) d.window.push_back(i);
      d.slot[static_cast<size_t>(t * n_keys + j)] = it->second;
    }
  }
  // Compressed rows follow the window rows in the decoded table.
  const int32_t nw = static_cast<int32_t>(d.window.size());
  for (int64_t t = 0; t < a.num_queries; ++t) {
    for (int64_t j = 0; j < a.num_compressed; ++j) {
      const int32_t i = a.compressed_index[t * a.num_compressed + j];
      if (i < 0) continue;
      auto [it, fresh] = comp_of.emplace(i, static_cast<int32_t>(d.compressed.size()));
      if (fresh) d.compressed.push_back(i);
      d.slot[static_cast<size_t>(t * n_keys + a.num_window + j)] = nw + it->second;
    }
  }
  return d;
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
      DI_ASSIGN_OR_RETURN(uint16_t * ob, m.scratch<uint16_t>(qn));
      DI_CUDA_RETURN_IF_ERROR(cuda::f32_to_bf16_bits(a.q, static_cast<int64_t>(qn), qb, m.stream));
      f.q = qb;
      f.num_queries = a.num_queries;
      f.kv = a.window_pool;
      f.fresh_kv = a.fresh;
      f.fresh_from = static_cast<int32_t>(a.window_pool_rows);
      f.num_indices = a.num_window;
      f.extra_kv = a.compressed_pool;
      f.num_extra = a.num_compressed;
      // One upload for both index lists: a pageable upload waits for the stream.
      const size_t nwi = static_cast<size_t>(a.num_queries * a.num_window),
                   nci = static_cast<size_t>(a.num_queries * a.num_compressed);
      std::vector<int32_t> idx(nwi + nci);
      std::copy_n(a.window_index, nwi, idx.begin());
      std::copy_n(a.compressed_index, nci, idx.begin() + static_cast<std::ptrdiff_t>(nwi));
      DI_ASSIGN_OR_RETURN(const int32_t* di, m.upload(idx.data(), idx.size()));
      if (nwi > 0) f.indices = di;
      if (nci > 0) f.extra_indices = di + nwi;
      f.sink = ds;
      f.softmax_scale = a.softmax_scale;
      f.out = ob;
      // Small batches take the split path (same bits) when its workspace fits in the arena.
      if (a.num_queries <= cuda::kAttnSplitMaxQueries) {
        const size_t wb = cuda::sparse_attention_fp8_workspace_bytes(
            a.num_queries, static_cast<int64_t>(a.num_window) + a.num_compressed);
        if (Expected<uint8_t*> ws = m.scratch<uint8_t>(wb)) {
          f.workspace = *ws;
          f.workspace_bytes = wb;
        }
      }
      DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention_fp8(f, m.stream));
      DI_CUDA_RETURN_IF_ERROR(
          cuda::bf16_bits_to_f32(ob, static_cast<int64_t>(qn), a.out, m.stream));
      return {};
    }
    // Exact path: the distinct rows decoded to fp32, then the fp32 kernel over row indices.
    const DistinctRows d = distinct_rows(a);
    const int64_t nw = static_cast<int64_t>(d.window.size()),
                  nc = static_cast<int64_t>(d.compressed.size());
    DI_ASSIGN_OR_RETURN(float* table,
                        m.scratch<float>(static_cast<size_t>((nw + nc) * a.head_dim)));
    std::vector<int32_t> meta(d.window);  // [window rows | compressed rows | slots]: one upload
    meta.insert(meta.end(), d.compressed.begin(), d.compressed.end());
    meta.insert(meta.end(), d.slot.begin(), d.slot.end());
    DI_ASSIGN_OR_RETURN(const int32_t* dw, m.upload(meta.data(), meta.size()));
    const int32_t* dc = dw + nw;
    const int32_t* di = dc + nc;
    DI_CUDA_RETURN_IF_ERROR(cuda::decode_kv_rows_f32(a.window_pool, a.window_pool_rows, a.fresh,
                                                     KvFormat::kFp8, a.head_dim, dw, nw, table,
                                                     m.stream));
    DI_CUDA_RETURN_IF_ERROR(cuda::decode_kv_rows_f32(a.compressed_pool, INT64_MAX, nullptr,
                                                     KvFormat::kFp4, a.head_dim, dc, nc,
                                                     table + nw * a.head_dim, m.stream));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::sparse_attention(a.q, a.num_queries, a.num_heads, a.head_dim, table, di,
                               static_cast<int64_t>(a.num_window) + a.num_compressed, ds,
                               a.softmax_scale, a.out, m.stream));
    return {};
  });
}

}  // namespace di::backend
