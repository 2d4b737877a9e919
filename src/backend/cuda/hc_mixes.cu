// Hyper-connection mixes (kernels::hc_mixes_token). The (2+hc)*hc mix product and the sum of
// squares are dot_f32 chains over hc*dim (20,480 at V4.1): for few rows one block per (output,
// row) multiplies into shared memory and runs the add chains there (hc_mix_products: the
// pipelined kernel of hc_mix_pipe.cu where it applies, else the staged one here), for many rows
// the product is hc_mix_rows or dense_gemm with the F32 `fn` as weights. The per-token tail (RMS
// factor, sigmoids, softmax, Sinkhorn) runs one thread per value, each in the CPU's order, by one
// warp per row for hc <= 4 when the sums of squares are given (hc_mixes_warp.cu), else by a block.
// Bitwise except where an exp rounds differently from glibc's expf (device_numeric.cuh).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/hc_mix_pipe.h"
#include "backend/cuda/hc_mixes_warp.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

namespace {

// Sinkhorn over c [hc, hc] (hc * hc <= 32) by warp 0, one lane per element held in a register:
// each lane sums its own column (or row) from the other lanes by shuffles in the CPU's order and
// divides its element, so the bits are the serial loop's while the hc^2 divisions of a half-step
// run side by side. (It was a block-wide loop with two barriers per half-step: 12 us per token
// at 20 iterations, as long as the mix products before it.)
__device__ void sinkhorn_warp(float* c, int hc, int iters, float hc_eps) {
  const int e = static_cast<int>(threadIdx.x % 32);
  const bool mine = e < hc * hc;
  const int i = mine ? e / hc : 0, j = mine ? e % hc : 0;
  float v = mine ? c[e] : 0.0f;
  auto normalize = [&](bool cols) {
    float sum = 0;
    for (int k = 0; k < hc; ++k) {
      sum = __fadd_rn(sum, __shfl_sync(0xffffffffu, v, cols ? k * hc + j : i * hc + k));
    }
    v = __fdiv_rn(v, __fadd_rn(sum, hc_eps));
  };
  normalize(true);
  for (int it = 0; it < iters - 1; ++it) {
    normalize(false);
    normalize(true);
  }
  if (mine) c[e] = v;
}

// The same for hc * hc > 32, block-wide (threads >= hc * hc take part in the barriers only): each
// thread sums its own column (or row) in the CPU's order and divides its element, so the bits are
// the serial loop's while the hc^2 divisions of a half-step run side by side.
__device__ void sinkhorn_parallel(float* c, int hc, int iters, float hc_eps) {
  const int e = static_cast<int>(threadIdx.x);
  const bool mine = e < hc * hc;
  const int i = mine ? e / hc : 0, j = mine ? e % hc : 0;
  auto normalize = [&](bool cols) {
    float sum = 0, v = 0;
    if (mine) {
      for (int k = 0; k < hc; ++k) sum = __fadd_rn(sum, cols ? c[k * hc + j] : c[i * hc + k]);
      v = __fdiv_rn(c[e], __fadd_rn(sum, hc_eps));
    }
    __syncthreads();
    if (mine) c[e] = v;
    __syncthreads();
  };
  normalize(true);
  for (int it = 0; it < iters - 1; ++it) {
    normalize(false);
    normalize(true);
  }
}

// Block (o - first, r): the mix product raw[r, o] = dot_f32(x[r], fn[o]) for o < mix, and for
// o == mix the sum of squares of x[r], both in the CPU's lane order: the block multiplies into a
// by-lane buffer, then eight threads run the add chains (lane_chain.cuh).
__global__ void hc_mix_products_kernel(const float* x,
                                       int64_t hc_dim,
                                       const float* fn,
                                       int mix,
                                       int first,
                                       float* raw,
                                       float* sum_squares) {
  pdl::enter_dependent_grid();
  extern __shared__ float4 buf4[];
  float* buf = reinterpret_cast<float*>(buf4);
  __shared__ float lanes[8];
  const int o = first + static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y;
  const float* xr = x + r * hc_dim;
  const bool squares = o == mix;
  const float* other = squares ? xr : fn + static_cast<int64_t>(o) * hc_dim;
  auto a = [&](int64_t k) { return xr[k]; };
  auto b = [&](int64_t k) { return other[k]; };
  products_by_lane(a, b, hc_dim, buf);
  __syncthreads();
  const float v = lane_dot(buf, hc_dim, a, b, lanes);
  if (threadIdx.x != 0) return;
  if (squares) {
    sum_squares[r] = v;
  } else {
    raw[r * mix + o] = v;
  }
}

// One block of kMixThreads per token row. The tail runs side by side in the CPU's per-value
// order: the RMS factor once (thread 0), then thread e < hc^2 computes comb element e (its row's
// max and, after a barrier, its row's sum, in the CPU's order) while threads hc^2 .. hc^2 + 2hc
// compute the pre and post sigmoids; then Sinkhorn. `sum_squares` (per row) may be null, then
// it is computed here (slowly: eight latency-bound chains over global memory).
constexpr int kMixThreads = 96;
static_assert(kMixThreads >= HcCoefficients::kMaxHc * (HcCoefficients::kMaxHc + 2));

__global__ void __launch_bounds__(kMixThreads) hc_mixes_kernel(const float* x,
                                                               int64_t hc_dim,
                                                               const float* sum_squares,
                                                               const float* raw,
                                                               const float* scale,
                                                               const float* base,
                                                               int hc,
                                                               int sinkhorn_iters,
                                                               float hc_eps,
                                                               float norm_eps,
                                                               HcCoefficients* out) {
  pdl::enter_dependent_grid();
  __shared__ float lanes[8];
  __shared__ float rsqrt_shared;
  __shared__ float exps[HcCoefficients::kMaxHc * HcCoefficients::kMaxHc];
  __shared__ HcCoefficients o;
  constexpr int kFloats = static_cast<int>(sizeof(HcCoefficients) / sizeof(float));
  float* of = reinterpret_cast<float*>(&o);
  const int t = static_cast<int>(threadIdx.x);
  const int64_t r = blockIdx.x;
  const float* xr = x + r * hc_dim;
  const int64_t full = hc_dim / 8 * 8;
  if (!sum_squares && t < 8) {
    float l = 0;
    for (int64_t k = t; k < full; k += 8) l = __fadd_rn(l, __fmul_rn(xr[k], xr[k]));
    lanes[t] = l;
  }
  for (int i = t; i < kFloats; i += kMixThreads) of[i] = 0;  // unused entries stay zero
  __syncthreads();
  if (t == 0) {
    float ss = 0;
    if (sum_squares) {
      ss = sum_squares[r];
    } else {
      ss = combine_lanes(lanes);
      for (int64_t k = full; k < hc_dim; ++k) ss = __fadd_rn(ss, __fmul_rn(xr[k], xr[k]));
    }
    rsqrt_shared =
        __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(hc_dim)), norm_eps)));
  }
  __syncthreads();
  const float rsqrt = rsqrt_shared;
  const float* m = raw + r * (2 + hc) * hc;  // m[q] * rsqrt is the CPU's mixes[q]
  const int cells = hc * hc;
  float e = 0;
  if (t < cells) {
    const int i = t / hc, j = t % hc;
    float row_max = -INFINITY, mine = 0;
    for (int jj = 0; jj < hc; ++jj) {
      const int q = 2 * hc + i * hc + jj;
      const float c = __fadd_rn(__fmul_rn(__fmul_rn(m[q], rsqrt), scale[2]), base[q]);
      row_max = fmaxf(row_max, c);
      if (jj == j) mine = c;
    }
    e = exp_f32(__fsub_rn(mine, row_max));
    exps[t] = e;
  } else if (t < cells + hc) {
    const int i = t - cells;
    o.pre[i] = __fadd_rn(
        sigmoid_f32(__fadd_rn(__fmul_rn(__fmul_rn(m[i], rsqrt), scale[0]), base[i])), hc_eps);
  } else if (t < cells + 2 * hc) {
    const int i = t - cells - hc;
    o.post[i] = __fmul_rn(
        2.0f,
        sigmoid_f32(__fadd_rn(__fmul_rn(__fmul_rn(m[hc + i], rsqrt), scale[1]), base[hc + i])));
  }
  __syncthreads();
  if (t < cells) {
    const int i = t / hc;
    float row_sum = 0;
    for (int jj = 0; jj < hc; ++jj) row_sum = __fadd_rn(row_sum, exps[i * hc + jj]);
    o.comb[t] = __fadd_rn(__fdiv_rn(e, row_sum), hc_eps);
  }
  __syncthreads();
  if (hc * hc <= 32) {
    if (t < 32) sinkhorn_warp(o.comb, hc, sinkhorn_iters, hc_eps);
    __syncthreads();
  } else {
    sinkhorn_parallel(o.comb, hc, sinkhorn_iters, hc_eps);
  }
  float* dst = reinterpret_cast<float*>(out + r);
  for (int i = t; i < kFloats; i += kMixThreads) dst[i] = of[i];
}

// Blocks (first .. mix) x rows of hc_mix_products_kernel.
cudaError_t launch_products(const float* x,
                            int64_t rows,
                            int64_t hc_dim,
                            const float* fn,
                            int mix,
                            int first,
                            float* raw,
                            float* sum_squares,
                            cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (rows > 65535 || mix < 1) return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(lane_buffer_bytes(hc_dim));
  cudaError_t e = cudaFuncSetAttribute(
      hc_mix_products_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(mix + 1 - first), static_cast<unsigned>(rows));
  pdl::launch_dependent(hc_mix_products_kernel, dim3(grid), dim3(256), smem, s, x, hc_dim, fn, mix,
                        first, raw, sum_squares);
  return cudaGetLastError();
}

}  // namespace

bool hc_mix_products_fit(int64_t hc_dim) {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return false;
  }
  return 2 * hc_dim * static_cast<int64_t>(sizeof(float)) + 1024 <= optin;
}

cudaError_t hc_mix_products_staged(const float* x,
                                   int64_t rows,
                                   int64_t hc_dim,
                                   const float* fn,
                                   int mix,
                                   int first,
                                   float* raw,
                                   float* sum_squares,
                                   cudaStream_t s) {
  return launch_products(x, rows, hc_dim, fn, mix, first, raw, sum_squares, s);
}

// Up to 64 rows: the pipelined kernel (hc_mix_pipe.cu; 7 us at one V4.1 row against the staged
// kernel's 15.5, 23 with fn out of the L2) where its alignment and width hold; else the staged
// one. Both give the same bits.
cudaError_t hc_mix_products(const float* x,
                            int64_t rows,
                            int64_t hc_dim,
                            const float* fn,
                            int mix,
                            float* raw,
                            float* sum_squares,
                            cudaStream_t s) {
  if (rows <= kHcMixPipeMaxRows && mix >= 1 && hc_mix_pipe_supports(x, rows, hc_dim, fn)) {
    return hc_mix_products_pipelined(x, rows, hc_dim, fn, mix, 0, raw, sum_squares, kHcMixPipeWarps,
                                     s);
  }
  return launch_products(x, rows, hc_dim, fn, mix, 0, raw, sum_squares, s);
}

cudaError_t hc_sum_squares(
    const float* x, int64_t rows, int64_t hc_dim, float* sum_squares, cudaStream_t s) {
  if (rows <= kHcMixPipeMaxRows && hc_mix_pipe_supports(x, rows, hc_dim, nullptr)) {
    return hc_mix_products_pipelined(x, rows, hc_dim, nullptr, 1, 1, nullptr, sum_squares,
                                     kHcMixPipeWarps, s);
  }
  return launch_products(x, rows, hc_dim, nullptr, 1, 1, nullptr, sum_squares, s);
}

cudaError_t hc_mixes(const float* x,
                     int64_t rows,
                     int64_t hc_dim,
                     const float* sum_squares,
                     const float* raw,
                     const float* scale,
                     const float* base,
                     int hc,
                     int sinkhorn_iters,
                     float hc_eps,
                     float norm_eps,
                     HcCoefficients* out,
                     cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (hc < 1 || hc > HcCoefficients::kMaxHc) return cudaErrorInvalidValue;
  if (sum_squares && hc_mixes_warp_supports(hc)) {
    return hc_mixes_warp(sum_squares, raw, rows, hc_dim, scale, base, hc, sinkhorn_iters, hc_eps,
                         norm_eps, out, s);
  }
  pdl::launch_dependent(hc_mixes_kernel, dim3(static_cast<unsigned>(rows)), dim3(kMixThreads), 0, s,
                        x, hc_dim, sum_squares, raw, scale, base, hc, sinkhorn_iters, hc_eps,
                        norm_eps, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
