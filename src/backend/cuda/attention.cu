// Sparse sink attention and indexer scores, in the order of kernels/ref/attention.cc: per
// (query, head) an online softmax over blocks of 64 keys, probabilities rounded to bf16 before the
// value product, block sums added in key order. One block per (query, head), keys read from
// global memory (L2) by index; the MQA key reuse across heads is not exploited yet, and the
// sequential block order leaves a batch-1 decode with only `heads` blocks of parallelism.
#include <algorithm>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kKeyBlock = 64;
constexpr int kAttnThreads = 512;  // one thread per (key of the block, dot-product lane)

// One block per (query, head). Scores: thread (key i, lane j) runs chain j of dot_f32(q, k_i)
// (elements j, j+8, ...); one thread per key combines the chains in the fixed order and adds the
// tail. Values: one thread per output dimension adds the block's keys in key order.
__global__ void __launch_bounds__(kAttnThreads) sparse_attention_kernel(const float* q,
                                                                        int num_heads,
                                                                        int dim,
                                                                        const float* kv,
                                                                        const int32_t* key_index,
                                                                        int64_t num_keys,
                                                                        const float* sink,
                                                                        float softmax_scale,
                                                                        float* out) {
  pdl::enter_dependent_grid();
  extern __shared__ float acc[];  // [dim]
  __shared__ float chains[kKeyBlock][8];
  __shared__ float s[kKeyBlock], p[kKeyBlock], pb[kKeyBlock];
  __shared__ int32_t keys[kKeyBlock];
  __shared__ float running_max, sum_exp, new_max_s, rescale_s;
  const int64_t t = blockIdx.x / num_heads;
  const int h = static_cast<int>(blockIdx.x % num_heads);
  const float* qh = q + (t * num_heads + h) * dim;
  const int32_t* idx = key_index + t * num_keys;
  const int full = dim / 8 * 8;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) acc[d] = 0.0f;
  if (threadIdx.x == 0) {
    running_max = -1e30f;
    sum_exp = 0.0f;
  }
  for (int64_t b0 = 0; b0 < num_keys; b0 += kKeyBlock) {
    const int nb = static_cast<int>(num_keys - b0 < kKeyBlock ? num_keys - b0 : kKeyBlock);
    if (threadIdx.x < nb) keys[threadIdx.x] = idx[b0 + threadIdx.x];
    __syncthreads();
    {
      const int i = threadIdx.x / 8, j = threadIdx.x % 8;
      if (i < nb && keys[i] >= 0) {
        const float* k = kv + int64_t{keys[i]} * dim;
        float c = 0.0f;
        for (int e = j; e < full; e += 8) c = __fadd_rn(c, __fmul_rn(qh[e], k[e]));
        chains[i][j] = c;
      }
    }
    __syncthreads();
    if (threadIdx.x < nb) {
      const int i = threadIdx.x;
      float v = -INFINITY;
      if (keys[i] >= 0) {
        const float* l = chains[i];
        float dot = __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                              __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
        const float* k = kv + int64_t{keys[i]} * dim;
        for (int e = full; e < dim; ++e) dot = __fadd_rn(dot, __fmul_rn(qh[e], k[e]));
        v = __fmul_rn(dot, softmax_scale);
      }
      s[i] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_max = -INFINITY;
#pragma unroll 16
      for (int i = 0; i < nb; ++i) block_max = fmaxf(block_max, s[i]);
      const float new_max = fmaxf(running_max, block_max);
      new_max_s = new_max;
      rescale_s = exp_f32(__fsub_rn(running_max, new_max));
    }
    __syncthreads();
    if (threadIdx.x < nb) {
      const float e = exp_f32(__fsub_rn(s[threadIdx.x], new_max_s));
      p[threadIdx.x] = e;
      pb[threadIdx.x] = round_bf16(e);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_sum = 0.0f;
#pragma unroll 16
      for (int i = 0; i < nb; ++i) block_sum = __fadd_rn(block_sum, p[i]);
      sum_exp = __fadd_rn(__fmul_rn(sum_exp, rescale_s), block_sum);
      running_max = new_max_s;
    }
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
      float a = __fmul_rn(acc[d], rescale_s);
      for (int i = 0; i < nb; ++i) {
        if (keys[i] >= 0) a = __fadd_rn(a, __fmul_rn(pb[i], kv[int64_t{keys[i]} * dim + d]));
      }
      acc[d] = a;
    }
    __syncthreads();
  }
  __shared__ float total;
  if (threadIdx.x == 0) total = __fadd_rn(sum_exp, exp_f32(__fsub_rn(sink[h], running_max)));
  __syncthreads();
  float* oh = out + (t * num_heads + h) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) oh[d] = round_bf16(__fdiv_rn(acc[d], total));
}

__device__ __forceinline__ const float* key_row(const PagedKeys& k, int64_t t, int64_t s, int dim) {
  const int64_t row = int64_t{k.pages[k.page_offset[t] + s / k.per]} * k.per + s % k.per;
  return k.pool + row * dim;
}

__global__ void index_scores_kernel(const float* q,
                                    const float* w,
                                    int64_t num_queries,
                                    int heads,
                                    int dim,
                                    PagedKeys keys,
                                    int64_t num_keys,
                                    const int64_t* num_visible,
                                    float* scores) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= num_queries * num_keys) return;
  const int64_t t = i / num_keys, s = i % num_keys;
  if (s >= num_visible[t]) {
    scores[i] = -INFINITY;
    return;
  }
  const float* key = key_row(keys, t, s, dim);
  float total = 0.0f;
  for (int h = 0; h < heads; ++h) {
    const float dot = round_bf16(dot8(q + (t * heads + h) * dim, key, dim));
    total = __fadd_rn(total, round_bf16(__fmul_rn(fmaxf(dot, 0.0f), w[t * heads + h])));
  }
  scores[i] = round_bf16(total);
}

// Few (query, key) pairs (decode): one block per pair, one thread per head computing its dot
// product (the key row staged once in shared memory), then thread 0 adds the heads in order, as
// the kernel above does per thread. Same bits, heads x more threads in flight.
constexpr int kPairMaxDim = 1024;

__global__ void index_scores_pair_kernel(const float* q,
                                         const float* w,
                                         int heads,
                                         int dim,
                                         PagedKeys keys,
                                         int64_t num_keys,
                                         const int64_t* num_visible,
                                         float* scores) {
  pdl::enter_dependent_grid();
  __shared__ float key[kPairMaxDim];
  extern __shared__ float head_terms[];  // [heads]
  const int64_t i = blockIdx.x, t = i / num_keys, s = i % num_keys;
  if (s >= num_visible[t]) {
    if (threadIdx.x == 0) scores[i] = -INFINITY;
    return;
  }
  const float* row = key_row(keys, t, s, dim);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) key[d] = row[d];
  __syncthreads();
  for (int h = threadIdx.x; h < heads; h += blockDim.x) {
    const float dot = round_bf16(dot8(q + (t * heads + h) * dim, key, dim));
    head_terms[h] = round_bf16(__fmul_rn(fmaxf(dot, 0.0f), w[t * heads + h]));
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  float total = 0.0f;
  for (int h = 0; h < heads; ++h) total = __fadd_rn(total, head_terms[h]);
  scores[i] = round_bf16(total);
}

}  // namespace

cudaError_t sparse_attention(const float* q,
                             int64_t num_queries,
                             int num_heads,
                             int head_dim,
                             const float* kv,
                             const int32_t* key_index,
                             int64_t num_keys,
                             const float* sink,
                             float softmax_scale,
                             float* out,
                             cudaStream_t s) {
  if (num_queries == 0 || num_heads == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(num_queries * num_heads);
  pdl::launch_dependent(sparse_attention_kernel, dim3(grid), dim3(kAttnThreads),
                        sizeof(float) * head_dim, s, q, num_heads, head_dim, kv, key_index,
                        num_keys, sink, softmax_scale, out);
  return cudaGetLastError();
}

cudaError_t index_scores(const float* q,
                         const float* weights,
                         int64_t num_queries,
                         int num_heads,
                         int head_dim,
                         const PagedKeys& keys,
                         int64_t num_keys,
                         const int64_t* num_visible,
                         float* scores,
                         cudaStream_t s) {
  if (index_scores_tc_fits(num_heads, head_dim)) {
    return index_scores_tc(q, weights, num_queries, num_heads, head_dim, keys, num_keys,
                           num_visible, scores, s);
  }
  return index_scores_simt(q, weights, num_queries, num_heads, head_dim, keys, num_keys,
                           num_visible, scores, s);
}

cudaError_t index_scores_simt(const float* q,
                              const float* weights,
                              int64_t num_queries,
                              int num_heads,
                              int head_dim,
                              const PagedKeys& keys,
                              int64_t num_keys,
                              const int64_t* num_visible,
                              float* scores,
                              cudaStream_t s) {
  const int64_t n = num_queries * num_keys;
  if (n == 0) return cudaSuccess;
  // A thread per pair fills the device from about 32K pairs on; below that, a block per pair.
  if (n < 32768 && head_dim <= kPairMaxDim && num_heads <= 1024) {
    const int threads = std::min(1024, (num_heads + 31) / 32 * 32);
    pdl::launch_dependent(index_scores_pair_kernel, dim3(static_cast<unsigned>(n)), dim3(threads),
                          sizeof(float) * num_heads, s, q, weights, num_heads, head_dim, keys,
                          num_keys, num_visible, scores);
  } else {
    pdl::launch_dependent(index_scores_kernel, dim3(static_cast<unsigned>((n + 255) / 256)),
                          dim3(256), 0, s, q, weights, num_queries, num_heads, head_dim, keys,
                          num_keys, num_visible, scores);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
