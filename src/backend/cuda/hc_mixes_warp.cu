// The mixes' tail by one warp per row (hc <= 4). Lane e < hc^2 owns comb element e: it computes
// its whole comb row (hc values, the row max, hc exps and their sum, each in the CPU's order: the
// same bits every lane of the row gets) so no lane waits for another; lanes hc^2 .. hc^2 + 2 hc
// compute the pre and post sigmoids; every lane computes the RMS factor itself. Every load is
// issued at the start. Sinkhorn then runs on the comb lanes, each half-step's hc shuffles issued
// together (hc is a template constant) before the sum's adds in order. Why: the block kernel
// (hc_mixes.cu) took 13.1 us per launch (cuda_kernels_bench --latency-ops, H200) for about 40
// dependent divisions: four barriers, its loads after the first, and a Sinkhorn loop whose
// shuffles waited on each add; this one took 8.6 us, and 3.7 us once its idle lanes stopped
// taking __fdiv_rn's slow path (lat13, see sinkhorn's call below).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/hc_mixes_warp.h"

namespace di::backend::cuda {

namespace {

template <int kHc>
__device__ __forceinline__ float sinkhorn_lane(float v, int iters, float hc_eps) {
  const int e = static_cast<int>(threadIdx.x);
  const bool mine = e < kHc * kHc;
  const int i = mine ? e / kHc : 0, j = mine ? e % kHc : 0;
  auto normalize = [&](bool cols) {
    float g[kHc];
#pragma unroll
    for (int k = 0; k < kHc; ++k)
      g[k] = __shfl_sync(0xffffffffu, v, cols ? k * kHc + j : i * kHc + k);
    float sum = 0;
#pragma unroll
    for (int k = 0; k < kHc; ++k) sum = __fadd_rn(sum, g[k]);
    v = __fdiv_rn(v, __fadd_rn(sum, hc_eps));
  };
  normalize(true);
  for (int it = 0; it < iters - 1; ++it) {
    normalize(false);
    normalize(true);
  }
  return v;
}

template <int kHc>
__global__ void __launch_bounds__(32) hc_mixes_warp_kernel(const float* sum_squares,
                                                           const float* raw,
                                                           int64_t hc_dim,
                                                           const float* scale,
                                                           const float* base,
                                                           int sinkhorn_iters,
                                                           float hc_eps,
                                                           float norm_eps,
                                                           HcCoefficients* out) {
  pdl::enter_dependent_grid();
  constexpr int kCells = kHc * kHc;
  constexpr int kFloats = static_cast<int>(sizeof(HcCoefficients) / sizeof(float));
  static_assert(kCells + 2 * kHc <= 32);
  const int t = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x;
  const float* m = raw + r * (2 + kHc) * kHc;  // m[q] * rsqrt is the CPU's mixes[q]
  // The lane's role: a comb row (kHc values from q0), or one pre / post value.
  const bool comb = t < kCells, pre = !comb && t < kCells + kHc,
             post = t >= kCells + kHc && t < kCells + 2 * kHc;
  const int q0 = comb ? 2 * kHc + t / kHc * kHc : pre ? t - kCells : post ? t - kCells : 0;
  const int n = comb ? kHc : (pre || post) ? 1 : 0;
  float mv[kHc], bv[kHc];
#pragma unroll
  for (int k = 0; k < kHc; ++k) {
    mv[k] = k < n ? m[q0 + k] : 0.0f;
    bv[k] = k < n ? base[q0 + k] : 0.0f;
  }
  const float sc = scale[comb ? 2 : pre ? 0 : 1];
  const float ss = sum_squares[r];
  const float rsqrt =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(hc_dim)), norm_eps)));
  float v = 0;
  if (comb) {
    float c[kHc], row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kHc; ++k) {
      c[k] = __fadd_rn(__fmul_rn(__fmul_rn(mv[k], rsqrt), sc), bv[k]);
      row_max = fmaxf(row_max, c[k]);
    }
    float e[kHc], row_sum = 0;
#pragma unroll
    for (int k = 0; k < kHc; ++k) e[k] = exp_f32(__fsub_rn(c[k], row_max));
#pragma unroll
    for (int k = 0; k < kHc; ++k) row_sum = __fadd_rn(row_sum, e[k]);
    float mine = e[0];
#pragma unroll
    for (int k = 1; k < kHc; ++k) mine = k == t % kHc ? e[k] : mine;
    v = __fadd_rn(__fdiv_rn(mine, row_sum), hc_eps);
  } else if (pre || post) {
    const float g = sigmoid_f32(__fadd_rn(__fmul_rn(__fmul_rn(mv[0], rsqrt), sc), bv[0]));
    v = pre ? __fadd_rn(g, hc_eps) : __fmul_rn(2.0f, g);
  }
  // The other lanes divide along (their results are dropped) and must not take __fdiv_rn's slow
  // path: with 0.0f they did, every division (a zero dividend fails the fast path's check), and
  // the warp then ran that branch's ~20 dependent instructions after each of the ~40 divisions
  // (ncu, lat13: 40 calls per launch). 1.0f over a comb sum keeps them on the fast path; comb
  // lanes only read comb lanes, so their bits do not change.
  const float sk = sinkhorn_lane<kHc>(comb ? v : 1.0f, sinkhorn_iters, hc_eps);
  if (comb) v = sk;
  // HcCoefficients as floats: pre[kMaxHc], post[kMaxHc], comb[kMaxHc^2]; unused entries zero.
  float* dst = reinterpret_cast<float*>(out + r);
  constexpr int kMax = HcCoefficients::kMaxHc;
  for (int f0 = 0; f0 < kFloats; f0 += 32) {  // every lane shuffles each round (sources too)
    const int f = f0 + t;
    int src = -1;
    if (f < kMax) {
      src = f < kHc ? kCells + f : -1;
    } else if (f < 2 * kMax) {
      src = f - kMax < kHc ? kCells + kHc + (f - kMax) : -1;
    } else {
      const int e = f - 2 * kMax;
      src = e < kCells ? e : -1;
    }
    const float got = __shfl_sync(0xffffffffu, v, src < 0 ? 0 : src);
    if (f < kFloats) dst[f] = src < 0 ? 0.0f : got;
  }
}

}  // namespace

bool hc_mixes_warp_supports(int hc) {
  return hc >= 1 && hc <= 4;
}

cudaError_t hc_mixes_warp(const float* sum_squares,
                          const float* raw,
                          int64_t rows,
                          int64_t hc_dim,
                          const float* scale,
                          const float* base,
                          int hc,
                          int sinkhorn_iters,
                          float hc_eps,
                          float norm_eps,
                          HcCoefficients* out,
                          cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  switch (hc) {
    case 1:
      pdl::launch_dependent(hc_mixes_warp_kernel<1>, dim3(grid), dim3(32), 0, s, sum_squares, raw,
                            hc_dim, scale, base, sinkhorn_iters, hc_eps, norm_eps, out);
      break;
    case 2:
      pdl::launch_dependent(hc_mixes_warp_kernel<2>, dim3(grid), dim3(32), 0, s, sum_squares, raw,
                            hc_dim, scale, base, sinkhorn_iters, hc_eps, norm_eps, out);
      break;
    case 3:
      pdl::launch_dependent(hc_mixes_warp_kernel<3>, dim3(grid), dim3(32), 0, s, sum_squares, raw,
                            hc_dim, scale, base, sinkhorn_iters, hc_eps, norm_eps, out);
      break;
    case 4:
      pdl::launch_dependent(hc_mixes_warp_kernel<4>, dim3(grid), dim3(32), 0, s, sum_squares, raw,
                            hc_dim, scale, base, sinkhorn_iters, hc_eps, norm_eps, out);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
