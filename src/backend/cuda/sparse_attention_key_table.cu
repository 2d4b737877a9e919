// The key table of the seesaw kernel's gather mode (sparse_attention_key_table.h): the distinct
// stored rows of a call decoded once, and each query's keys as table rows.
#include <algorithm>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_key_table.h"
#include "backend/cuda/sparse_attention_steps.cuh"

namespace di::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPairs = 4;  // keys per thread in the mark and key-row kernels
constexpr int32_t kCompressedBit = 1 << 30;

// The workspace: the table first (16-byte rows of chunks for cp.async), then key_rows, the row
// map (one word per window row, then per compressed row: 0 unmarked, -1 marked without a table
// row, else its table row), the list of marked rows by table row, and the counter.
struct Carve {
  uint16_t* table;
  int32_t* key_rows;
  int32_t* map;
  int32_t* list;
  int32_t* counter;
  size_t bytes;
};

size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}

Carve carve(void* base, const SparseAttentionFp8Args& a, const SparseAttentionKeyTableShape& s) {
  const int64_t keys = static_cast<int64_t>(a.num_indices) + a.num_extra;
  auto* p = static_cast<uint8_t*>(base);
  Carve c{};
  size_t off = 0;
  auto take = [&](size_t n) {
    uint8_t* r = p ? p + off : nullptr;
    off += align16(n);
    return r;
  };
  c.table = reinterpret_cast<uint16_t*>(take(static_cast<size_t>(s.capacity + 1) * kKvDim * 2));
  c.key_rows = reinterpret_cast<int32_t*>(take(static_cast<size_t>(a.num_queries * keys) * 4));
  c.map = reinterpret_cast<int32_t*>(take(static_cast<size_t>(s.window_rows + s.extra_rows) * 4));
  c.list = reinterpret_cast<int32_t*>(take(static_cast<size_t>(s.capacity + 1) * 4));
  c.counter = reinterpret_cast<int32_t*>(take(4));
  c.bytes = off;
  return c;
}

// Key j of query t as a row map index: the window index, or window_rows + the compressed index;
// -1 for an empty slot or an index outside its pool.
__device__ __forceinline__ int64_t map_index(
    const SparseAttentionFp8Args& a, int64_t window_rows, int64_t extra_rows, int64_t t, int j) {
  if (j < a.num_indices) {
    const int32_t r = a.indices[t * a.num_indices + j];
    return r >= 0 && r < window_rows ? r : -1;
  }
  const int32_t r = a.extra_indices[t * a.num_extra + (j - a.num_indices)];
  return r >= 0 && r < extra_rows ? window_rows + r : -1;
}

// This thread's keys in the mark and key-row kernels: kPairs keys kThreads apart (their loads
// issued together: the map reads are scattered, and one at a time the kernels waited on each).
__device__ __forceinline__ int64_t first_key() {
  return static_cast<int64_t>(blockIdx.x) * kThreads * kPairs + threadIdx.x;
}
__device__ __forceinline__ void thread_keys(const SparseAttentionFp8Args& a,
                                            int64_t window_rows,
                                            int64_t extra_rows,
                                            int64_t (&m)[kPairs]) {
  const int keys = a.num_indices + a.num_extra;
  const int64_t n = a.num_queries * keys;
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    const int64_t i = first_key() + u * kThreads;
    m[u] = i < n ? map_index(a, window_rows, extra_rows, i / keys, static_cast<int>(i % keys)) : -1;
  }
}

__global__ void clear_kernel(int32_t* map, int64_t n, int32_t* counter) {
  pdl::enter_dependent_grid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    map[i] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) *counter = 0;
}

// The first key to reach a row claims it (0 -> -1) and takes the next table row if one is left.
__global__ void mark_kernel(SparseAttentionFp8Args a,
                            int64_t window_rows,
                            int64_t extra_rows,
                            int32_t* map,
                            int32_t* list,
                            int32_t* counter,
                            int64_t capacity) {
  pdl::enter_dependent_grid();
  int64_t m[kPairs];
  thread_keys(a, window_rows, extra_rows, m);
  int32_t seen[kPairs];
#pragma unroll
  for (int u = 0; u < kPairs; ++u) seen[u] = m[u] >= 0 ? map[m[u]] : 1;  // (a stale 0: one CAS)
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    if (seen[u] != 0 || atomicCAS(map + m[u], 0, -1) != 0) continue;
    const int32_t s = atomicAdd(counter, 1) + 1;
    if (s <= capacity) {
      list[s] = static_cast<int32_t>(m[u]);
      map[m[u]] = s;
    }
  }
}

// Warp s decodes table row s (row 0: zeros) with the producers' decoders: lane l dims 16 l ..
// 16 l + 15.
__global__ void decode_kernel(SparseAttentionFp8Args a,
                              int64_t window_rows,
                              const int32_t* list,
                              const int32_t* counter,
                              int64_t capacity,
                              uint16_t* table) {
  pdl::enter_dependent_grid();
  const int lane = threadIdx.x & 31;
  const int64_t s = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (s > min(static_cast<int64_t>(*counter), capacity)) return;
  uint32_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (s > 0) {
    const int64_t m = list[s];
    const bool fp8 = m < window_rows;
    attn::decode_stored_row(a, fp8, static_cast<int32_t>(fp8 ? m : m - window_rows), lane, v);
  }
  uint4* dst = reinterpret_cast<uint4*>(table + s * kKvDim + lane * 16);
  dst[0] = make_uint4(v[0], v[1], v[2], v[3]);
  dst[1] = make_uint4(v[4], v[5], v[6], v[7]);
}

__global__ void key_rows_kernel(SparseAttentionFp8Args a,
                                int64_t window_rows,
                                int64_t extra_rows,
                                const int32_t* map,
                                int32_t* key_rows) {
  pdl::enter_dependent_grid();
  int64_t m[kPairs];
  thread_keys(a, window_rows, extra_rows, m);
  int32_t v[kPairs];
#pragma unroll
  for (int u = 0; u < kPairs; ++u) v[u] = m[u] >= 0 ? map[m[u]] : 0;
  const int64_t n = a.num_queries * (a.num_indices + a.num_extra);
#pragma unroll
  for (int u = 0; u < kPairs; ++u) {
    const int64_t i = first_key() + u * kThreads;
    if (i >= n) continue;
    if (v[u] < 0) {  // no table row: the producers decode it from its pool
      v[u] = m[u] < window_rows ? ~static_cast<int32_t>(m[u])
                                : ~(static_cast<int32_t>(m[u] - window_rows) | kCompressedBit);
    }
    key_rows[i] = v[u];
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

}  // namespace

size_t sparse_attention_key_table_bytes(const SparseAttentionFp8Args& a,
                                        const SparseAttentionKeyTableShape& s) {
  return carve(nullptr, a, s).bytes;
}

cudaError_t sparse_attention_key_table(SparseAttentionFp8Args& a,
                                       const SparseAttentionKeyTableShape& s,
                                       void* workspace,
                                       size_t bytes,
                                       cudaStream_t stream) {
  const int64_t keys = static_cast<int64_t>(a.num_indices) + a.num_extra;
  if (a.num_queries <= 0 || a.num_queries > 0x7fffffff || a.num_indices < 0 || a.num_extra < 0 ||
      keys > kAttnMaxKeys || s.window_rows < 0 || s.window_rows >= kCompressedBit ||
      s.extra_rows < 0 || s.extra_rows >= kCompressedBit || s.capacity < 0 ||
      s.capacity >= kCompressedBit || (a.num_indices > 0 && (!a.kv || !a.indices)) ||
      (a.fresh_from < 0x7fffffff && !a.fresh_kv) ||
      (a.num_extra > 0 && (!a.extra_kv || !a.extra_indices)) || !workspace ||
      bytes < sparse_attention_key_table_bytes(a, s)) {
    return cudaErrorInvalidValue;
  }
  const Carve c = carve(workspace, a, s);
  const int64_t map_rows = s.window_rows + s.extra_rows, pairs = a.num_queries * keys;
  cudaError_t e = pdl::launch_dependent(
      clear_kernel, dim3(blocks_for(std::min<int64_t>(map_rows, int64_t{kThreads} * 1024))),
      dim3(kThreads), 0, stream, c.map, map_rows, c.counter);
  if (e == cudaSuccess) {
    e = pdl::launch_dependent(mark_kernel, dim3(blocks_for((pairs + kPairs - 1) / kPairs)),
                              dim3(kThreads), 0, stream, a, s.window_rows, s.extra_rows, c.map,
                              c.list, c.counter, s.capacity);
  }
  if (e == cudaSuccess) {
    const int64_t warps = std::min(s.capacity, pairs) + 1;
    e = pdl::launch_dependent(decode_kernel, dim3(blocks_for(warps * 32)), dim3(kThreads), 0,
                              stream, a, s.window_rows, c.list, c.counter, s.capacity, c.table);
  }
  if (e == cudaSuccess) {
    e = pdl::launch_dependent(key_rows_kernel, dim3(blocks_for((pairs + kPairs - 1) / kPairs)),
                              dim3(kThreads), 0, stream, a, s.window_rows, s.extra_rows, c.map,
                              c.key_rows);
  }
  if (e != cudaSuccess) return e;
  a.key_table = c.table;
  a.key_rows = c.key_rows;
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
