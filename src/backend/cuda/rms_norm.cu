// RMSNorm (kernels::rms_norm): y = bf16(w * (x * r)), r = 1 / sqrt(sum_squares_f32(x) / cols +
// eps), bitwise. The sum of squares is a dot_f32 chain (eight lanes of cols / 8 dependent adds),
// which fixes the kernel's latency: one block per row, whatever the batch (a row's bits never
// depend on the others). Rows up to kHeldCols: every thread loads its share of w before the grid
// dependency (a weight: no kernel of the forward writes it) and of x after it, stores the
// squares by lane into shared memory (lane_chain.cuh), one barrier, then lanes 0-7 run their
// chains in one pass while the others wait, and all normalize from their registers once warp 0
// has published r. Longer rows: the plain kernel (eight chains over global memory).
//
// Why not the chunked pipeline of lane_pipe.cuh (session 10, kept for the Engram gate): the row's
// loads are all issued at once and land within one round trip, so there was little to overlap,
// while each of its 14 chunks (5120 columns) cost warp 0 a named barrier, index math and a
// shared-load round trip before its first add (~130 cycles), and the producers' per-element
// arrival checks (a loop with a divergent-branch guard and a barrier per chunk) made their
// instruction stream ~1,000 instructions long, so the last chunk was released late. ncu (H200,
// docs/notes/cuda-kernels.md, lat13): 5120 columns 15.2 k cycles, 4.7 of 10.7 cycles between a
// warp's instructions at a barrier; the chain itself is 2.6 k. This kernel: 5120 columns 7.1 k
// SM cycles (ncu 7.8 -> 5.0 us; graph replay 6.27 -> 3.29 us), 512 columns 3.9 -> 3.3 us.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;  // the plain kernel's
constexpr int kHeldThreads = 512;
constexpr int kHeld = 15;  // elements per thread kept in registers
constexpr int64_t kHeldCols = int64_t{kHeldThreads} * kHeld;

// 32-bit index math throughout (a held row is at most kHeldCols values): 64-bit indices cost
// registers and instructions on every element.
__global__ void __launch_bounds__(kHeldThreads)
    rms_norm_held_kernel(const float* x, int64_t cols, const float* w, float eps, float* y) {
  __shared__ float4 buf4[lane_buffer_bytes(kHeldCols) / 16];
  __shared__ float r_shared;
  float* buf = reinterpret_cast<float*>(buf4);
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(cols);
  const int steps = n / 8, full = steps * 8, stride = static_cast<int>(lane_stride(steps));
  float wv[kHeld], xv[kHeld];
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int i = t + u * kHeldThreads;
    wv[u] = i < n ? w[i] : 0.0f;
  }
  pdl::enter_dependent_grid();
  const float* xr = x + blockIdx.x * cols;
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int i = t + u * kHeldThreads;
    xv[u] = i < n ? xr[i] : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int i = t + u * kHeldThreads;
    if (i < full) buf[(i & 7) * stride + (i >> 3)] = __fmul_rn(xv[u], xv[u]);
  }
  __syncthreads();
  if (t < 32) {
    const float l = t < 8 ? chain_range(buf + t * stride, 0, steps, 0.0f) : 0.0f;
    float lanes[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) lanes[j] = __shfl_sync(0xffffffffu, l, j);
    if (t == 0) {
      float s = combine_lanes(lanes);
      for (int k = full; k < n; ++k) s = __fadd_rn(s, __fmul_rn(xr[k], xr[k]));
      const float var = __fdiv_rn(s, static_cast<float>(cols));
      r_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
    }
  }
  __syncthreads();
  const float r = r_shared;
  float* yr = y + blockIdx.x * cols;
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int i = t + u * kHeldThreads;
    if (i < n) yr[i] = round_bf16(__fmul_rn(wv[u], __fmul_rn(xv[u], r)));
  }
}

__global__ void rms_norm_kernel(const float* x, int64_t cols, const float* w, float eps, float* y) {
  pdl::enter_dependent_grid();
  __shared__ float lanes[8];
  __shared__ float r;
  const float* xr = x + blockIdx.x * cols;
  const int64_t full = cols / 8 * 8;
  if (threadIdx.x < 8) {
    float l = 0;
    for (int64_t k = threadIdx.x; k < full; k += 8) l = __fadd_rn(l, __fmul_rn(xr[k], xr[k]));
    lanes[threadIdx.x] = l;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = combine_lanes(lanes);
    for (int64_t k = full; k < cols; ++k) s = __fadd_rn(s, __fmul_rn(xr[k], xr[k]));
    const float var = __fdiv_rn(s, static_cast<float>(cols));
    r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  }
  __syncthreads();
  float* yr = y + blockIdx.x * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    yr[i] = round_bf16(__fmul_rn(w[i], __fmul_rn(xr[i], r)));
  }
}

}  // namespace

cudaError_t rms_norm(const float* x,
                     int64_t rows,
                     int64_t cols,
                     const float* w,
                     float eps,
                     float* y,
                     cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (cols <= kHeldCols) {
    pdl::launch_dependent(rms_norm_held_kernel, dim3(static_cast<unsigned>(rows)),
                          dim3(kHeldThreads), 0, s, x, cols, w, eps, y);
  } else {
    pdl::launch_dependent(rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s,
                          x, cols, w, eps, y);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
