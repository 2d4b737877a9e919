// Hyper-connection mixes (kernels::hc_mixes_token). The (2+hc)*hc mix product and the sum of
// squares are dot_f32 chains over hc*dim (20,480 at V4.1): for few rows one block per (output,
// row) runs them over shared-memory copies (hc_mix_products), for many rows the product is
// dense_gemm with the F32 `fn` as weights. The per-token tail (RMS factor, sigmoids, softmax) is
// serial on one thread in the CPU's order; Sinkhorn runs one thread per comb element. Bitwise
// except where an exp rounds differently from glibc's expf (device_numeric.cuh).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_sum.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kMaxMix = (2 + HcCoefficients::kMaxHc) * HcCoefficients::kMaxHc;

// Sinkhorn over c [hc, hc] in shared memory with one thread per element (threads >= hc * hc
// take part in the barriers only): each thread sums its own column (or row) in the CPU's order
// and divides its element, so the bits are the serial loop's while the hc^2 divisions of a
// half-step run side by side.
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

// Block (o, r): the mix product raw[r, o] = dot_f32(x[r], fn[o]) for o < mix, and for o == mix
// the sum of squares of x[r], both in the CPU's lane order over shared-memory copies.
__global__ void hc_mix_products_kernel(
    const float* x, int64_t hc_dim, const float* fn, int mix, float* raw, float* sum_squares) {
  extern __shared__ float4 staged4[];
  float* staged = reinterpret_cast<float*>(staged4);  // x row [hc_dim], then fn row [hc_dim]
  __shared__ float lanes[8];
  const int o = static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y;
  stage_to_shared(x + r * hc_dim, staged, hc_dim);
  const bool squares = o == mix;
  if (!squares) stage_to_shared(fn + static_cast<int64_t>(o) * hc_dim, staged + hc_dim, hc_dim);
  __syncthreads();
  const float v = lane_dot_shared(staged, squares ? staged : staged + hc_dim, hc_dim, lanes);
  if (threadIdx.x != 0) return;
  if (squares) {
    sum_squares[r] = v;
  } else {
    raw[r * mix + o] = v;
  }
}

// Thread 0's serial part of hc_mixes_kernel: the RMS factor (from `sum_squares` or the lanes),
// the pre/post sigmoids and comb's row softmax, into *o.
__device__ void mixes_before_sinkhorn(const float* xr,
                                      int64_t hc_dim,
                                      float ss,
                                      const float* raw,
                                      const float* scale,
                                      const float* base,
                                      int hc,
                                      float hc_eps,
                                      float norm_eps,
                                      HcCoefficients* o) {
  const float rsqrt =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(hc_dim)), norm_eps)));
  const int mix = (2 + hc) * hc;
  float m[kMaxMix];
  for (int j = 0; j < mix; ++j) m[j] = __fmul_rn(raw[j], rsqrt);
  *o = HcCoefficients{};  // unused entries zero, so the copy back carries no garbage
  for (int i = 0; i < hc; ++i) {
    o->pre[i] = __fadd_rn(sigmoid_f32(__fadd_rn(__fmul_rn(m[i], scale[0]), base[i])), hc_eps);
    o->post[i] =
        __fmul_rn(2.0f, sigmoid_f32(__fadd_rn(__fmul_rn(m[hc + i], scale[1]), base[hc + i])));
  }
  float* c = o->comb;
  for (int i = 0; i < hc; ++i) {
    float row_max = -INFINITY;
    for (int j = 0; j < hc; ++j) {
      const int q = 2 * hc + i * hc + j;
      c[i * hc + j] = __fadd_rn(__fmul_rn(m[q], scale[2]), base[q]);
      row_max = fmaxf(row_max, c[i * hc + j]);
    }
    float row_sum = 0;
    for (int j = 0; j < hc; ++j) {
      c[i * hc + j] = exp_f32(__fsub_rn(c[i * hc + j], row_max));
      row_sum = __fadd_rn(row_sum, c[i * hc + j]);
    }
    for (int j = 0; j < hc; ++j)
      c[i * hc + j] = __fadd_rn(__fdiv_rn(c[i * hc + j], row_sum), hc_eps);
  }
}

// One block of kMixThreads (>= kMaxHc^2) per token row; `sum_squares` (per row) may be null, then
// it is computed here (slowly: eight latency-bound chains over global memory).
constexpr int kMixThreads = 64;
static_assert(kMixThreads >= HcCoefficients::kMaxHc * HcCoefficients::kMaxHc);

__global__ void hc_mixes_kernel(const float* x,
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
  __shared__ float lanes[8];
  __shared__ HcCoefficients o;
  const int64_t r = blockIdx.x;
  const float* xr = x + r * hc_dim;
  const int64_t full = hc_dim / 8 * 8;
  if (!sum_squares && threadIdx.x < 8) {
    float l = 0;
    for (int64_t k = threadIdx.x; k < full; k += 8) l = __fadd_rn(l, __fmul_rn(xr[k], xr[k]));
    lanes[threadIdx.x] = l;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float ss = 0;
    if (sum_squares) {
      ss = sum_squares[r];
    } else {
      ss = __fadd_rn(__fadd_rn(__fadd_rn(lanes[0], lanes[1]), __fadd_rn(lanes[2], lanes[3])),
                     __fadd_rn(__fadd_rn(lanes[4], lanes[5]), __fadd_rn(lanes[6], lanes[7])));
      for (int64_t k = full; k < hc_dim; ++k) ss = __fadd_rn(ss, __fmul_rn(xr[k], xr[k]));
    }
    mixes_before_sinkhorn(xr, hc_dim, ss, raw + r * (2 + hc) * hc, scale, base, hc, hc_eps,
                          norm_eps, &o);
  }
  __syncthreads();
  sinkhorn_parallel(o.comb, hc, sinkhorn_iters, hc_eps);
  if (threadIdx.x == 0) out[r] = o;
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

cudaError_t hc_mix_products(const float* x,
                            int64_t rows,
                            int64_t hc_dim,
                            const float* fn,
                            int mix,
                            float* raw,
                            float* sum_squares,
                            cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (rows > 65535 || mix < 1) return cudaErrorInvalidValue;
  const size_t smem = 2 * static_cast<size_t>(hc_dim) * sizeof(float);
  cudaError_t e = cudaFuncSetAttribute(
      hc_mix_products_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(mix + 1), static_cast<unsigned>(rows));
  hc_mix_products_kernel<<<grid, 256, smem, s>>>(x, hc_dim, fn, mix, raw, sum_squares);
  return cudaGetLastError();
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
  hc_mixes_kernel<<<static_cast<unsigned>(rows), kMixThreads, 0, s>>>(
      x, hc_dim, sum_squares, raw, scale, base, hc, sinkhorn_iters, hc_eps, norm_eps, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
