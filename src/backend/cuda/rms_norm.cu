// RMSNorm (kernels::rms_norm): y = bf16(w * (x * r)), r = 1 / sqrt(sum_squares_f32(x) / cols +
// eps), bitwise. The sum of squares is a dot_f32 chain (eight lanes of cols / 8 dependent adds),
// which fixes the kernel's latency: one block per row, whatever the batch (a row's bits never
// depend on the others). Rows up to kHeldCols: the block loads the row once into registers,
// writes the squares by lane into shared memory (lane_chain.cuh) so the chains are adds only,
// loads w while the chains run, and normalizes from the registers. Longer rows: the plain
// kernel (eight chains over global memory).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kHeld = 32;  // elements per thread kept in registers
constexpr int64_t kHeldCols = int64_t{kThreads} * kHeld;

__global__ void __launch_bounds__(kThreads)
    rms_norm_held_kernel(const float* x, int64_t cols, const float* w, float eps, float* y) {
  pdl::enter_dependent_grid();
  __shared__ float4 buf4[lane_buffer_bytes(kHeldCols) / 16];
  __shared__ float lanes[8];
  __shared__ float r_shared;
  float* buf = reinterpret_cast<float*>(buf4);
  const float* xr = x + blockIdx.x * cols;
  const int t = static_cast<int>(threadIdx.x);
  const int64_t full = cols / 8 * 8, stride = lane_stride(cols / 8);
  float xv[kHeld], wv[kHeld];
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int64_t i = t + int64_t{u} * kThreads;
    xv[u] = i < cols ? xr[i] : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int64_t i = t + int64_t{u} * kThreads;
    if (i < full) buf[(i & 7) * stride + (i >> 3)] = __fmul_rn(xv[u], xv[u]);
  }
  __syncthreads();
  // w's loads are issued here and land while threads 0-7 run the chains.
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int64_t i = t + int64_t{u} * kThreads;
    wv[u] = i < cols ? w[i] : 0.0f;
  }
  auto sq = [&](int64_t k) { return xr[k]; };
  const float s = lane_dot(buf, cols, sq, sq, lanes);
  if (t == 0) {
    const float var = __fdiv_rn(s, static_cast<float>(cols));
    r_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  }
  __syncthreads();
  const float r = r_shared;
  float* yr = y + blockIdx.x * cols;
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int64_t i = t + int64_t{u} * kThreads;
    if (i < cols) yr[i] = round_bf16(__fmul_rn(wv[u], __fmul_rn(xv[u], r)));
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
    pdl::launch_dependent(rms_norm_held_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads),
                          0, s, x, cols, w, eps, y);
  } else {
    pdl::launch_dependent(rms_norm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s,
                          x, cols, w, eps, y);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
