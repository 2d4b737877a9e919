// Indexer scores on tensor cores, bitwise equal to kernels/ref/attention.cc index_scores_query.
//
// Why the MMA can match the CPU bit for bit. The indexer's q and keys are FP4 fake-quantized
// (e2m1 x a power-of-two block scale, then bf16): every value is +-{1, 1.5} x 2^e, two significant
// bits. For one (head, key) pair let T be the largest and E the smallest exponent of a nonzero
// value in each row. Every value is a multiple of 2^(E-1), so every product is a multiple of
// g = 2^(Eq+Ek-2), and every partial sum of the D products is at most D x 2.25 x 2^(Tq+Tk)
// = N x g with N <= 9 D 2^(Tq+Tk-Eq-Ek). While N < 2^24 and g is a normal fp32 number, every
// product and every partial sum, in any order, is exactly representable in fp32: the CPU's 8-lane
// dot_f32 rounds nothing, and neither does an MMA that forms products exactly and adds terms
// aligned to the largest of them with at least 24 bits (NVIDIA's tensor cores do; tested bitwise
// on adversarial inputs at the bound). Both then return the exact dot product.
//
// The kernel checks that condition per pair from per-row statistics (max |x|, min nonzero |x|,
// and that every value has <= 2 significant bits, no subnormal, inf or NaN): a pair that fails it
// recomputes its dot product with dot8 (the CPU's order) on CUDA cores, so the result is bitwise
// for any input; FP4 rows whose block scales span a few octaves never fail it.
//
// Layout: one CTA per (query, key range), 4 warps; a warp step is 16 keys (the MMA's M) x all
// heads (N, 8 per MMA) x head_dim (K). The key rows are the A operand, read from global memory
// straight into registers: within each 16-wide k step, lane (g, t) needs logical k 2t, 2t+1,
// 2t+8, 2t+9 of rows g and g+8, which we map to physical dims 4t .. 4t+3 (one float4); q (B, bf16
// in shared memory) uses the same map, so the dot products are unchanged. Each (key, head) dot
// then takes the reference's per-head steps in registers; the head sum, in head order, runs in
// shared memory, one lane per key.
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_bf16.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kStepKeys = 16;           // keys per warp step (MMA M)
constexpr int kMaxHeads = 64;           // 8 MMA n-tiles
constexpr int kMaxDim = 128;            // 8 k steps
constexpr int kQStride = kMaxDim + 16;  // bf16 per q row: 72 words, 8-byte reads conflict-free
constexpr int kTermStride = kMaxHeads + 8;
constexpr int kBadExp = 1000;  // max-exponent stand-in for a row the MMA must not take
constexpr int kZeroExp = 300;  // min-exponent stand-in for an all-zero row

// Per-row statistics over fp32 bit patterns: OR of all, max |x|, min nonzero |x| (as |x| - 1,
// where zero wraps to the largest value).
struct RowBits {
  uint32_t any = 0, hi = 0, lo = 0xffffffffu;
  __device__ __forceinline__ void add(float x) {
    const uint32_t u = __float_as_uint(x), a = u & 0x7fffffffu;
    any |= u;
    hi = max(hi, a);
    lo = min(lo, a - 1u);
  }
};

// (max exponent, min exponent), biased; max = kBadExp when a value is not +-{1, 1.5} x 2^e
// normal (more mantissa bits, subnormal, inf, NaN), min = kZeroExp for an all-zero row.
struct RowExp {
  int t, e;
};
__device__ __forceinline__ RowExp row_exp(const RowBits& b) {
  const bool zero = b.lo == 0xffffffffu;
  const bool bad =
      (b.any & 0x003fffffu) != 0 || b.hi >= 0x7f800000u || (!zero && b.lo + 1u < 0x00800000u);
  return {bad ? kBadExp : static_cast<int>(b.hi >> 23),
          zero ? kZeroExp : static_cast<int>((b.lo + 1u) >> 23)};
}

// The file comment's condition, biased exponents: no overflow (sum < 2^128), g = 2^(Eq+Ek-256)
// normal, N < 2^24 (limit = the largest m with 9 * dim * 2^m < 2^24).
__device__ __forceinline__ bool mma_exact(RowExp q, RowExp k, int limit) {
  return q.t + k.t <= 372 && q.e + k.e >= 130 && (q.t + k.t) - (q.e + k.e) <= limit;
}

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
  // Exact when the caller's statistics pass (low 16 bits zero); otherwise the pair is recomputed.
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

__device__ __forceinline__ RowBits quad_reduce(RowBits b) {
#pragma unroll
  for (int m = 1; m <= 2; m <<= 1) {
    b.any |= __shfl_xor_sync(0xffffffffu, b.any, m);
    b.hi = max(b.hi, __shfl_xor_sync(0xffffffffu, b.hi, m));
    b.lo = min(b.lo, __shfl_xor_sync(0xffffffffu, b.lo, m));
  }
  return b;
}

struct Shared {
  __align__(16) uint16_t q[kMaxHeads][kQStride];  // bf16 bits
  __align__(16) float terms[kWarps][kStepKeys][kTermStride];
  float w[kMaxHeads];
  RowExp qexp[kMaxHeads];
};

template <int KS>  // head_dim / 16
__global__ void __launch_bounds__(kWarps * 32, 4)
    index_scores_tc_kernel(const float* q,
                           const float* w,
                           int heads,
                           PagedKeys keys,
                           int64_t num_keys,
                           const int64_t* num_visible,
                           int keys_per_cta,
                           int limit,
                           float* scores,
                           unsigned long long* fallbacks) {
  pdl::enter_dependent_grid();
  constexpr int kDim = KS * 16;
  __shared__ Shared sh;
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = (heads + 7) / 8;
  const float* qt = q + t * heads * kDim;

  // q to bf16 in shared memory with its row statistics; padding heads are zero rows.
  for (int h = warp; h < nt * 8; h += kWarps) {
    RowBits b;
    for (int c = lane; c < kDim / 4; c += 32) {
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (h < heads) v = __ldg(reinterpret_cast<const float4*>(qt + h * kDim) + c);
      b.add(v.x);
      b.add(v.y);
      b.add(v.z);
      b.add(v.w);
      *reinterpret_cast<uint2*>(&sh.q[h][4 * c]) =
          make_uint2(bf16_pair(v.x, v.y), bf16_pair(v.z, v.w));
    }
    b.any = __reduce_or_sync(0xffffffffu, b.any);
    b.hi = __reduce_max_sync(0xffffffffu, b.hi);
    b.lo = __reduce_min_sync(0xffffffffu, b.lo);
    if (lane == 0) {
      sh.qexp[h] = row_exp(b);
      sh.w[h] = h < heads ? w[t * heads + h] : 0.0f;
    }
  }
  __syncthreads();

  const int64_t vis = min(num_visible[t], num_keys);
  const int64_t k_begin = blockIdx.y * static_cast<int64_t>(keys_per_cta);
  const int64_t k_end = min(k_begin + keys_per_cta, num_keys);
  const int g = lane / 4, tq = lane % 4;
  const int32_t* pages = keys.pages + keys.page_offset[t];
  float(*terms)[kTermStride] = sh.terms[warp];
  unsigned long long fell_back = 0;

  for (int64_t s0 = k_begin + warp * kStepKeys; s0 < k_end; s0 += kWarps * kStepKeys) {
    if (s0 < vis) {  // warp-uniform
      const float* row[2] = {nullptr, nullptr};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int s = static_cast<int>(s0) + g + 8 * r;
        if (s < vis)
          row[r] = keys.pool + (int64_t{pages[s / keys.per]} * keys.per + s % keys.per) * kDim;
      }
      float4 v[2][KS];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int j = 0; j < KS; ++j) {
          v[r][j] = row[r] ? __ldg(reinterpret_cast<const float4*>(row[r] + 16 * j + 4 * tq))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
      RowBits kb[2];
      uint32_t a[KS][4];
#pragma unroll
      for (int j = 0; j < KS; ++j) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          kb[r].add(v[r][j].x);
          kb[r].add(v[r][j].y);
          kb[r].add(v[r][j].z);
          kb[r].add(v[r][j].w);
        }
        a[j][0] = bf16_pair(v[0][j].x, v[0][j].y);
        a[j][1] = bf16_pair(v[1][j].x, v[1][j].y);
        a[j][2] = bf16_pair(v[0][j].z, v[0][j].w);
        a[j][3] = bf16_pair(v[1][j].z, v[1][j].w);
      }
      const RowExp kexp[2] = {row_exp(quad_reduce(kb[0])), row_exp(quad_reduce(kb[1]))};

      float acc[kMaxHeads / 8][4];
#pragma unroll
      for (int n = 0; n < kMaxHeads / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
      for (int j = 0; j < KS; ++j) {
#pragma unroll
        for (int n = 0; n < kMaxHeads / 8; ++n) {
          if (n < nt) {
            const uint2 b = *reinterpret_cast<const uint2*>(&sh.q[8 * n + g][16 * j + 4 * tq]);
            mma_bf16(acc[n], a[j], b.x, b.y);
          }
        }
      }
      // Per (key, head): the reference's steps; a pair outside the exact condition recomputes
      // its dot product in the CPU's order.
#pragma unroll
      for (int n = 0; n < kMaxHeads / 8; ++n) {
        if (n >= nt) continue;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float term[2];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int h = 8 * n + 2 * tq + c;
            float dot = acc[n][2 * r + c];
            if (!mma_exact(sh.qexp[h], kexp[r], limit) && row[r] != nullptr && h < heads) {
              dot = dot8(qt + h * kDim, row[r], kDim);
              ++fell_back;
            }
            term[c] = round_bf16(__fmul_rn(fmaxf(round_bf16(dot), 0.0f), sh.w[h]));
          }
          *reinterpret_cast<float2*>(&terms[g + 8 * r][8 * n + 2 * tq]) =
              make_float2(term[0], term[1]);
        }
      }
    }
    __syncwarp();
    if (lane < kStepKeys) {
      const int64_t s = s0 + lane;
      if (s < k_end) {
        float out = -INFINITY;
        if (s < vis) {
          float total = 0.0f;
#pragma unroll 8
          for (int h = 0; h < heads; ++h) total = __fadd_rn(total, terms[lane][h]);
          out = round_bf16(total);
        }
        scores[t * num_keys + s] = out;
      }
    }
    __syncwarp();
  }
  if (fallbacks != nullptr && fell_back > 0) atomicAdd(fallbacks, fell_back);
}

// The largest m with 9 * dim * 2^m < 2^24 (the file comment's N < 2^24).
int exact_span_limit(int dim) {
  int m = 0;
  while (9.0 * dim * static_cast<double>(int64_t{1} << (m + 1)) < 16777216.0) ++m;
  return m;
}

}  // namespace

bool index_scores_tc_fits(int num_heads, int head_dim) {
  return num_heads >= 1 && num_heads <= kMaxHeads &&
         (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

cudaError_t index_scores_tc(const float* q,
                            const float* weights,
                            int64_t num_queries,
                            int num_heads,
                            int head_dim,
                            const PagedKeys& keys,
                            int64_t num_keys,
                            const int64_t* num_visible,
                            float* scores,
                            cudaStream_t s,
                            int keys_per_cta,
                            unsigned long long* fallbacks) {
  if (num_queries == 0 || num_keys == 0) return cudaSuccess;
  if (!index_scores_tc_fits(num_heads, head_dim)) return cudaErrorInvalidValue;
  if (keys_per_cta <= 0) {
    // Staging q costs a CTA about one 64-key round, so at least two rounds per CTA, and more
    // (a power of two) while the CTAs still fill one wave (4 resident per SM on 132 SMs):
    // measured best or within 7 % of it at 64 x 1K, 256 x 1K and 64 x 16K (docs/benchmarks.md).
    // Sizes only, so the launch is capturable; the split changes no bits.
    const int64_t rounds = num_queries * ((num_keys + 63) / 64);
    int per = 2;
    while (per < 16 && rounds / 528 >= 2 * per) per *= 2;
    keys_per_cta = 64 * per;
  }
  keys_per_cta = (keys_per_cta + 63) / 64 * 64;
  const int64_t chunks = (num_keys + keys_per_cta - 1) / keys_per_cta;
  if (chunks > 65535 || num_queries > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(num_queries), static_cast<unsigned>(chunks));
  const int limit = exact_span_limit(head_dim);
  switch (head_dim) {
    case 32:
      pdl::launch_dependent(index_scores_tc_kernel<2>, dim3(grid), dim3(kWarps * 32), 0, s, q,
                            weights, num_heads, keys, num_keys, num_visible, keys_per_cta, limit,
                            scores, fallbacks);
      break;
    case 64:
      pdl::launch_dependent(index_scores_tc_kernel<4>, dim3(grid), dim3(kWarps * 32), 0, s, q,
                            weights, num_heads, keys, num_keys, num_visible, keys_per_cta, limit,
                            scores, fallbacks);
      break;
    default:
      pdl::launch_dependent(index_scores_tc_kernel<8>, dim3(grid), dim3(kWarps * 32), 0, s, q,
                            weights, num_heads, keys, num_keys, num_visible, keys_per_cta, limit,
                            scores, fallbacks);
      break;
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
