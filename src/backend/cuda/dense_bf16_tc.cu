// Dense BF16-weight products on tensor cores for the `tensor` GEMM path (the head and the
// DSpark Markov head: 129,280 x 5,120). The exact kernels accumulate in the CPU's 8-lane fp32
// order on CUDA cores, which at 64-256 rows makes the head most of a decode step; here each
// output is a chain of bf16 m16n8k16 MMAs with fp32 accumulation in K order: within tolerance of
// the CPU, and the same chain for a row whatever else is in the call (an MMA output element
// depends only on its row of A and column of B), so batch invariance holds for every M.
#include <cstdint>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_bf16.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kWarps = 4;      // 16 output features per warp, 64 per CTA
constexpr int kTokGroups = 8;  // 8 tokens per MMA column group, 64 tokens per pass

__device__ __forceinline__ uint4 load16(const uint16_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// Each thread loads 8 consecutive K values (16 bytes) per 32-wide K chunk for W rows f0 + g and
// f0 + g + 8 and for token g of each group: K is permuted the same way for both operands (logical
// k 2q, 2q+1, 2q+8, 2q+9 of an MMA are physical 8q .. 8q+3, then 8q+4 .. 8q+7 for the second
// MMA), which leaves every dot product unchanged and makes each operand one 16-byte load.
// `splits` warps share a 16-feature tile, each a contiguous K range, and their partial sums are
// added in split order: the split depends on K only (never on the rows), and it gives small
// batches four times the warps to keep weight bytes in flight.
__global__ void __launch_bounds__(kWarps * 32) dense_bf16_tc_kernel(const uint16_t* __restrict__ x,
                                                                    int64_t rows,
                                                                    const uint16_t* __restrict__ w,
                                                                    int64_t n_out,
                                                                    int64_t k,
                                                                    int splits,
                                                                    int64_t group_out,
                                                                    int64_t x_stride,
                                                                    float* __restrict__ y,
                                                                    bool round) {
  __shared__ float partial[kWarps][kTokGroups][4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int tile = warp / splits, part = warp % splits;
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / splits) + tile) * 16;
  const int64_t fa = f0 + g, fb = f0 + g + 8;
  const int64_t k_part = k / splits, k_begin = part * k_part, k_end = k_begin + k_part;
  // Grouped products (wo_a): the tile's 16 features lie in one group, which reads its x slice.
  const uint16_t* xg = x + (min(f0, n_out - 1) / group_out) * k;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t t0 = 0; t0 < rows; t0 += kTokGroups * 8) {
    float acc[kTokGroups][4];
#pragma unroll
    for (int tg = 0; tg < kTokGroups; ++tg)
      acc[tg][0] = acc[tg][1] = acc[tg][2] = acc[tg][3] = 0.0f;
    const int64_t left = rows - t0;
    const int groups = left >= kTokGroups * 8 ? kTokGroups : static_cast<int>((left + 7) / 8);
#pragma unroll 2
    for (int64_t kc = k_begin; kc < k_end; kc += 32) {
      const int64_t off = kc + 8 * q;
      const uint4 a = fa < n_out ? load16(w + fa * k + off) : zero;
      const uint4 b = fb < n_out ? load16(w + fb * k + off) : zero;
      const uint32_t a0[4] = {a.x, b.x, a.y, b.y}, a1[4] = {a.z, b.z, a.w, b.w};
#pragma unroll
      for (int tg = 0; tg < kTokGroups; ++tg) {
        if (tg < groups) {
          const int64_t t = t0 + tg * 8 + g;
          const uint4 xv = t < rows ? load16(xg + t * x_stride + off) : zero;
          mma_bf16(acc[tg], a0, xv.x, xv.y);
          mma_bf16(acc[tg], a1, xv.z, xv.w);
        }
      }
    }
    if (splits > 1) {
#pragma unroll
      for (int tg = 0; tg < kTokGroups; ++tg) {
#pragma unroll
        for (int i = 0; i < 4; ++i) partial[warp][tg][i][lane] = acc[tg][i];
      }
      __syncthreads();
      if (part == 0) {
#pragma unroll
        for (int tg = 0; tg < kTokGroups; ++tg) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = partial[warp][tg][i][lane];
            for (int p = 1; p < splits; ++p) v = __fadd_rn(v, partial[warp + p][tg][i][lane]);
            acc[tg][i] = v;
          }
        }
      }
      __syncthreads();  // `partial` is written again by the next pass
    }
    if (part != 0) continue;
#pragma unroll
    for (int tg = 0; tg < kTokGroups; ++tg) {
      if (tg >= groups) continue;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t t = t0 + tg * 8 + 2 * q + j;
        if (t >= rows) continue;
        if (fa < n_out) y[t * n_out + fa] = round ? round_bf16(acc[tg][j]) : acc[tg][j];
        if (fb < n_out) y[t * n_out + fb] = round ? round_bf16(acc[tg][2 + j]) : acc[tg][2 + j];
      }
    }
  }
}

// K split in 4 (2) when every part stays a whole number of 32-wide chunks.
int k_splits(int64_t k) {
  return k % (4 * 32) == 0 ? 4 : k % (2 * 32) == 0 ? 2 : 1;
}

}  // namespace

bool dense_bf16_tc_supports(const DeviceWeight& w, int groups) {
  if (w.format != WeightFormat::kBF16 || w.in_features % 32 != 0 || groups < 1 ||
      w.out_features % groups != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) {
    return false;
  }
  return groups == 1 || (w.out_features / groups) % 16 == 0;  // a warp's features in one group
}

bool dense_bf16_tc_applies(const DeviceWeight& w) {
  return w.out_features >= 16384 && dense_bf16_tc_supports(w, 1);
}

cudaError_t dense_bf16_tc(const uint16_t* x,
                          int64_t rows,
                          const DeviceWeight& w,
                          int groups,
                          float* y,
                          bool round_bf16,
                          cudaStream_t s) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (!dense_bf16_tc_supports(w, groups) || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int splits = k_splits(w.in_features);
  const int64_t per_cta = kWarps / splits * 16;  // features per CTA
  const int64_t ctas = (w.out_features + per_cta - 1) / per_cta;
  dense_bf16_tc_kernel<<<static_cast<unsigned>(ctas), kWarps * 32, 0, s>>>(
      x, rows, reinterpret_cast<const uint16_t*>(w.data), w.out_features, w.in_features, splits,
      w.out_features / groups, groups * w.in_features, y, round_bf16);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
