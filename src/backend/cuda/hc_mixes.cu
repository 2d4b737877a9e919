// Hyper-connection mixes (kernels::hc_mixes_token) after the mix product: the RMS factor, the
// sigmoids of pre/post and the Sinkhorn normalization of comb. The (2+hc)*hc mix product itself is
// dense_gemm with the F32 `fn` as weights (the same 8-lane dot_f32 order), so this kernel receives
// its raw dot products. The per-token tail is a few hundred dependent scalar operations: one thread
// runs it in the CPU's order; only the sum of squares over hc*dim is spread over eight threads (the
// eight chains of sum_squares_f32). Bitwise except where an exp rounds differently from glibc's
// expf (device_numeric.cuh).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kMaxMix = (2 + HcCoefficients::kMaxHc) * HcCoefficients::kMaxHc;

__device__ void sinkhorn(float* c, int hc, int iters, float hc_eps) {
  auto normalize_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      float col = 0;
      for (int i = 0; i < hc; ++i) col = __fadd_rn(col, c[i * hc + j]);
      for (int i = 0; i < hc; ++i) c[i * hc + j] = __fdiv_rn(c[i * hc + j], __fadd_rn(col, hc_eps));
    }
  };
  auto normalize_rows = [&] {
    for (int i = 0; i < hc; ++i) {
      float row = 0;
      for (int j = 0; j < hc; ++j) row = __fadd_rn(row, c[i * hc + j]);
      for (int j = 0; j < hc; ++j) c[i * hc + j] = __fdiv_rn(c[i * hc + j], __fadd_rn(row, hc_eps));
    }
  };
  normalize_cols();
  for (int it = 0; it < iters - 1; ++it) {
    normalize_rows();
    normalize_cols();
  }
}

// One block of 32 threads per token row.
__global__ void hc_mixes_kernel(const float* x,
                                int64_t hc_dim,
                                const float* raw,
                                const float* scale,
                                const float* base,
                                int hc,
                                int sinkhorn_iters,
                                float hc_eps,
                                float norm_eps,
                                HcCoefficients* out) {
  __shared__ float lanes[8];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * hc_dim;
  const int64_t full = hc_dim / 8 * 8;
  if (threadIdx.x < 8) {
    float l = 0;
    for (int64_t k = threadIdx.x; k < full; k += 8) l = __fadd_rn(l, __fmul_rn(xr[k], xr[k]));
    lanes[threadIdx.x] = l;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  float ss = __fadd_rn(__fadd_rn(__fadd_rn(lanes[0], lanes[1]), __fadd_rn(lanes[2], lanes[3])),
                       __fadd_rn(__fadd_rn(lanes[4], lanes[5]), __fadd_rn(lanes[6], lanes[7])));
  for (int64_t k = full; k < hc_dim; ++k) ss = __fadd_rn(ss, __fmul_rn(xr[k], xr[k]));
  const float rsqrt =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(hc_dim)), norm_eps)));
  const int mix = (2 + hc) * hc;
  float m[kMaxMix];
  for (int j = 0; j < mix; ++j) m[j] = __fmul_rn(raw[r * mix + j], rsqrt);
  HcCoefficients o{};  // unused entries zero, so the copy back carries no garbage
  for (int i = 0; i < hc; ++i) {
    o.pre[i] = __fadd_rn(sigmoid_f32(__fadd_rn(__fmul_rn(m[i], scale[0]), base[i])), hc_eps);
    o.post[i] =
        __fmul_rn(2.0f, sigmoid_f32(__fadd_rn(__fmul_rn(m[hc + i], scale[1]), base[hc + i])));
  }
  float* c = o.comb;
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
  sinkhorn(c, hc, sinkhorn_iters, hc_eps);
  out[r] = o;
}

}  // namespace

cudaError_t hc_mixes(const float* x,
                     int64_t rows,
                     int64_t hc_dim,
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
  hc_mixes_kernel<<<static_cast<unsigned>(rows), 32, 0, s>>>(x, hc_dim, raw, scale, base, hc,
                                                             sinkhorn_iters, hc_eps, norm_eps, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
