// Device selections of the indexer (index_select.h). One CTA per row keeps a row's choice
// independent of the others (batch invariance) and needs no inter-CTA traffic; a decode row has
// a few thousand scores, so four passes over them stay in L1/L2.
#include <cub/block/block_scan.cuh>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/index_select.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 512;
constexpr uint32_t kNegInfKey = 0x007fffffu;  // order_key(-inf)

// Larger float -> larger key; -0.0 ranks as +0.0 (they compare equal on the CPU).
__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t b = __float_as_uint(f);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct TopkShared {
  typename cub::BlockScan<int, kThreads>::TempStorage scan;
  int hist[256];
  int digit, remaining, count;
};

// The k largest keys among key_of(i), i < n (ties: lower index), written ascending to out, then
// -1 up to width. With skip_neg_inf, -inf keys are absent (never chosen).
template <class KeyOf>
__device__ void block_topk(
    KeyOf key_of, int64_t n, int k, bool skip_neg_inf, int32_t* out, int width, TopkShared& sm) {
  const int tid = threadIdx.x;
  if (skip_neg_inf) {
    if (tid == 0) sm.count = 0;
    __syncthreads();
    int c = 0;
    for (int64_t i = tid; i < n; i += kThreads) c += key_of(i) != kNegInfKey;
    atomicAdd(&sm.count, c);
    __syncthreads();
    k = static_cast<int>(min(static_cast<int64_t>(k), static_cast<int64_t>(sm.count)));
  } else {
    k = static_cast<int>(min(static_cast<int64_t>(k), n));
  }
  uint32_t prefix = 0, mask = 0;
  if (tid == 0) sm.remaining = k;
  // Ordered before every read of `remaining`, also the one after the loop when k == 0 and the
  // loop's barriers do not run (its value is then unused, but racecheck saw the read race).
  __syncthreads();
  for (int shift = 24; k > 0 && shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) sm.hist[i] = 0;
    __syncthreads();
    for (int64_t i = tid; i < n; i += kThreads) {
      const uint32_t key = key_of(i);
      if ((skip_neg_inf && key == kNegInfKey) || (key & mask) != prefix) continue;
      atomicAdd(&sm.hist[(key >> shift) & 255], 1);
    }
    __syncthreads();
    if (tid < 32) {
      // Lane l holds digits 255 - 8l .. 248 - 8l (descending): find the digit where the count of
      // larger-or-equal keys first reaches `remaining`.
      int c[8], lane_sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) lane_sum += c[j] = sm.hist[255 - 8 * tid - j];
      int incl = lane_sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (tid >= o) incl += v;
      }
      const int need = sm.remaining;
      const unsigned hit = __ballot_sync(0xffffffffu, incl >= need);
      const int lane = __ffs(hit) - 1;
      __syncwarp();  // every lane has read `remaining` before the hit lane rewrites it
      if (tid == lane) {
        int acc = incl - lane_sum;
        for (int j = 0; j < 8; ++j) {
          if (acc + c[j] >= need) {
            sm.digit = 255 - 8 * tid - j;
            sm.remaining = need - acc;
            break;
          }
          acc += c[j];
        }
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sm.digit) << shift;
    mask |= 0xffu << shift;
  }
  // Compaction in index order: keys above the threshold, and the first `remaining` equal ones.
  const int need_eq = k > 0 ? sm.remaining : 0;
  __syncthreads();
  int eq_base = 0, sel_base = 0;
  for (int64_t base = 0; k > 0 && base < n && sel_base < k; base += kThreads) {
    const int64_t i = base + tid;
    bool gt = false, eq = false;
    if (i < n) {
      const uint32_t key = key_of(i);
      const bool present = !(skip_neg_inf && key == kNegInfKey);
      gt = present && key > prefix;
      eq = present && key == prefix;
    }
    int eq_rank = 0, eq_total = 0;
    cub::BlockScan<int, kThreads>(sm.scan).ExclusiveSum(eq ? 1 : 0, eq_rank, eq_total);
    __syncthreads();
    const bool sel = gt || (eq && eq_base + eq_rank < need_eq);
    int pos = 0, sel_total = 0;
    cub::BlockScan<int, kThreads>(sm.scan).ExclusiveSum(sel ? 1 : 0, pos, sel_total);
    __syncthreads();
    if (sel) out[sel_base + pos] = static_cast<int32_t>(i);
    eq_base += eq_total;
    sel_base += sel_total;
  }
  for (int j = max(k, 0) + tid; j < width; j += kThreads) out[j] = -1;
}

__global__ void __launch_bounds__(kThreads) index_topk_kernel(const float* scores,
                                                              int64_t num_keys,
                                                              const int64_t* visible,
                                                              int topk,
                                                              const int32_t* blocks,
                                                              int num_blocks,
                                                              int block_size,
                                                              int32_t* selected,
                                                              int width) {
  pdl::enter_dependent_grid();
  __shared__ TopkShared sm;
  extern __shared__ uint32_t allowed[];  // bitmap over blocks (when blocks != nullptr)
  const int64_t t = blockIdx.x;
  const float* s = scores + t * num_keys;
  const int64_t n = min(visible[t], num_keys);
  if (blocks) {
    const int64_t words = ((num_keys + block_size - 1) / block_size + 31) / 32;
    for (int64_t w = threadIdx.x; w < words; w += kThreads) allowed[w] = 0;
    __syncthreads();
    const int32_t* b = blocks + t * num_blocks;
    for (int j = threadIdx.x; j < num_blocks; j += kThreads) {
      if (b[j] >= 0 && b[j] < words * 32) atomicOr(&allowed[b[j] >> 5], 1u << (b[j] & 31));
    }
    __syncthreads();
    auto key_of = [&](int64_t i) {
      const int64_t blk = i / block_size;
      return (allowed[blk >> 5] >> (blk & 31)) & 1u ? order_key(s[i]) : kNegInfKey;
    };
    block_topk(key_of, n, topk, false, selected + t * width, width, sm);
  } else {
    block_topk([&](int64_t i) { return order_key(s[i]); }, n, topk, false, selected + t * width,
               width, sm);
  }
}

__global__ void __launch_bounds__(kThreads) candidate_blocks_kernel(const float* scores,
                                                                    int64_t num_keys,
                                                                    const int64_t* visible,
                                                                    int block_size,
                                                                    int topk_blocks,
                                                                    float* scratch,
                                                                    int64_t scratch_stride,
                                                                    int32_t* blocks,
                                                                    int width) {
  pdl::enter_dependent_grid();
  __shared__ TopkShared sm;
  const int64_t t = blockIdx.x;
  const float* s = scores + t * num_keys;
  const int64_t vis = min(visible[t], num_keys);
  const int64_t nb = vis > 0 ? (vis + block_size - 1) / block_size : 0;
  float* best = scratch + t * scratch_stride;
  for (int64_t b = threadIdx.x; b < nb; b += kThreads) {
    float m = -__int_as_float(0x7f800000);
    const int64_t end = min(vis, (b + 1) * block_size);
    for (int64_t i = b * block_size; i < end; ++i) m = m < s[i] ? s[i] : m;  // std::max
    best[b] = b == nb - 1 ? __int_as_float(0x7f800000) : m;
  }
  __syncthreads();
  block_topk([&](int64_t b) { return order_key(best[b]); }, nb, topk_blocks, true,
             blocks + t * width, width, sm);
}

__global__ void paged_rows_kernel(const int32_t* entries,
                                  int64_t n,
                                  int width,
                                  const int32_t* pages,
                                  const int64_t* page_offset,
                                  int per,
                                  int32_t* out) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int32_t e = entries[i];
  const int64_t r = i / width;
  out[i] = e < 0 ? -1 : pages[page_offset[r] + e / per] * per + e % per;
}

// The first index of the largest value of row[begin, end) over the block, into thread 0's bv and
// bi (bi == cols: none), through the caller's shared best_v / best_i [kThreads / 32]. Each
// thread keeps its first largest value (strictly greater replaces), then pairs combine preferring
// the larger value and, for equal values, the lower index: max_element's choice.
__device__ __forceinline__ void block_first_max(const float* row,
                                                int64_t begin,
                                                int64_t end,
                                                int64_t cols,
                                                float* best_v,
                                                int64_t* best_i,
                                                float& bv,
                                                int64_t& bi) {
  float v = -__int_as_float(0x7f800000);
  int64_t idx = cols;  // "none yet": loses every tie
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float a = row[i];
    if (idx == cols || a > v) {
      v = a;
      idx = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    if (oi < cols && (idx >= cols || ov > v || (ov == v && oi < idx))) {
      v = ov;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    bv = best_v[0];
    bi = best_i[0];
    for (int w = 1; w < kThreads / 32; ++w) {
      if (best_i[w] < cols &&
          (bi >= cols || best_v[w] > bv || (best_v[w] == bv && best_i[w] < bi))) {
        bv = best_v[w];
        bi = best_i[w];
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* x, int64_t cols, int32_t* out) {
  pdl::enter_dependent_grid();
  __shared__ float best_v[kThreads / 32];
  __shared__ int64_t best_i[kThreads / 32];
  float bv;
  int64_t bi;
  block_first_max(x + static_cast<int64_t>(blockIdx.x) * cols, 0, cols, cols, best_v, best_i, bv,
                  bi);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(bi < cols ? bi : 0);
}

// The same choice over long rows in two launches: block (c, r) scans chunk c of row r with
// argmax_kernel's rules (a 129,280-value row was one CTA's 517 KB: 16.8 us at batch 1), and one
// warp per row combines the chunks' winners with the same pairwise rule (larger value, then lower
// index; "none" loses), which is associative, so the split (a function of cols only) changes
// nothing.
constexpr int64_t kArgmaxChunk = 4096;

__global__ void __launch_bounds__(kThreads)
    argmax_chunk_kernel(const float* x, int64_t cols, float* part_v, int64_t* part_i) {
  pdl::enter_dependent_grid();
  __shared__ float best_v[kThreads / 32];
  __shared__ int64_t best_i[kThreads / 32];
  const int64_t chunks = gridDim.x, c = blockIdx.x, r = blockIdx.y;
  const int64_t begin = c * kArgmaxChunk, end = min(cols, begin + kArgmaxChunk);
  float bv;
  int64_t bi;
  block_first_max(x + r * cols, begin, end, cols, best_v, best_i, bv, bi);
  if (threadIdx.x == 0) {
    part_v[r * chunks + c] = bv;
    part_i[r * chunks + c] = bi;
  }
}

__global__ void argmax_combine_kernel(const float* part_v,
                                      const int64_t* part_i,
                                      int64_t rows,
                                      int64_t chunks,
                                      int64_t cols,
                                      int32_t* out) {
  pdl::enter_dependent_grid();
  const int64_t r = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // whole warps leave together
  float v = -__int_as_float(0x7f800000);
  int64_t idx = cols;
  for (int64_t c = lane; c < chunks; c += 32) {
    const float a = part_v[r * chunks + c];
    const int64_t ai = part_i[r * chunks + c];
    if (ai < cols && (idx >= cols || a > v || (a == v && ai < idx))) {
      v = a;
      idx = ai;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    if (oi < cols && (idx >= cols || ov > v || (ov == v && oi < idx))) {
      v = ov;
      idx = oi;
    }
  }
  if (lane == 0) out[r] = static_cast<int32_t>(idx < cols ? idx : 0);
}

}  // namespace

size_t argmax_work_bytes(int64_t rows, int64_t cols) {
  const int64_t chunks = (cols + kArgmaxChunk - 1) / kArgmaxChunk;
  return chunks < 4 ? 0 : static_cast<size_t>(rows * chunks) * (sizeof(float) + sizeof(int64_t));
}

cudaError_t argmax_rows(
    const float* x, int64_t rows, int64_t cols, int32_t* out, void* work, cudaStream_t stream) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (cols <= 0) return cudaErrorInvalidValue;
  const int64_t chunks = (cols + kArgmaxChunk - 1) / kArgmaxChunk;
  if (argmax_work_bytes(rows, cols) == 0 || rows > 65535) {
    pdl::launch_dependent(argmax_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0,
                          stream, x, cols, out);
    return cudaGetLastError();
  }
  if (work == nullptr || reinterpret_cast<uintptr_t>(work) % 8 != 0) return cudaErrorInvalidValue;
  auto* part_i = static_cast<int64_t*>(work);
  auto* part_v = reinterpret_cast<float*>(part_i + rows * chunks);
  pdl::launch_dependent(argmax_chunk_kernel,
                        dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)),
                        dim3(kThreads), 0, stream, x, cols, part_v, part_i);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  pdl::launch_dependent(argmax_combine_kernel, dim3(static_cast<unsigned>((rows + 7) / 8)),
                        dim3(256), 0, stream, part_v, part_i, rows, chunks, cols, out);
  return cudaGetLastError();
}

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
                       cudaStream_t stream) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (topk < 0 || width < 0 || (blocks && block_size <= 0)) return cudaErrorInvalidValue;
  size_t smem = 0;
  if (blocks) {
    smem = sizeof(uint32_t) *
           static_cast<size_t>(((num_keys + block_size - 1) / block_size + 31) / 32);
    if (smem > 48 * 1024) return cudaErrorInvalidValue;  // > 1.5M blocks: not a real context
  }
  pdl::launch_dependent(index_topk_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), smem,
                        stream, scores, num_keys, visible, topk, blocks, num_blocks, block_size,
                        selected, width);
  return cudaGetLastError();
}

int64_t candidate_blocks_scratch(int64_t rows, int64_t num_keys, int block_size) {
  return rows * ((num_keys + block_size - 1) / block_size);
}

cudaError_t candidate_blocks(const float* scores,
                             int64_t rows,
                             int64_t num_keys,
                             const int64_t* visible,
                             int block_size,
                             int topk_blocks,
                             float* scratch,
                             int32_t* blocks,
                             int width,
                             cudaStream_t stream) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (block_size <= 0 || topk_blocks < 0 || width < 0) return cudaErrorInvalidValue;
  pdl::launch_dependent(candidate_blocks_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads),
                        0, stream, scores, num_keys, visible, block_size, topk_blocks, scratch,
                        (num_keys + block_size - 1) / block_size, blocks, width);
  return cudaGetLastError();
}

cudaError_t paged_rows(const int32_t* entries,
                       int64_t rows,
                       int width,
                       const int32_t* pages,
                       const int64_t* page_offset,
                       int entries_per_page,
                       int32_t* out,
                       cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (entries_per_page <= 0) return cudaErrorInvalidValue;
  pdl::launch_dependent(paged_rows_kernel, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256),
                        0, stream, entries, n, width, pages, page_offset, entries_per_page, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
