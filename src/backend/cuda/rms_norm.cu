// RMSNorm (kernels::rms_norm): y = bf16(w * (x * r)), r = 1 / sqrt(sum_squares_f32(x) / cols +
// eps), bitwise. The sum of squares is a dot_f32 chain (eight lanes of cols / 8 dependent adds),
// which fixes the kernel's latency: one block per row, whatever the batch (a row's bits never
// depend on the others). Rows up to kHeldCols: warps 1.. load the row once into registers and
// stream the squares by lane into shared memory while warp 0 already runs the chains over the
// chunks stored (lane_pipe.cuh), then load w, and normalize from the registers once warp 0 has
// published r. Longer rows: the plain kernel (eight chains over global memory).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_pipe.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;  // the plain kernel's
constexpr int kHeldThreads = 512;
constexpr int kHeld = 16;  // elements per producer thread kept in registers
constexpr int64_t kHeldCols = int64_t{kHeldThreads - 32} * kHeld;

__global__ void __launch_bounds__(kHeldThreads)
    rms_norm_held_kernel(const float* x, int64_t cols, const float* w, float eps, float* y) {
  pdl::enter_dependent_grid();
  __shared__ float4 buf4[lane_buffer_bytes(kHeldCols) / 16];
  __shared__ float r_shared;
  float* buf = reinterpret_cast<float*>(buf4);
  const float* xr = x + blockIdx.x * cols;
  const PipePlan p = pipe_plan(cols);
  const int pt = static_cast<int>(threadIdx.x) - 32, nprod = kHeldThreads - 32;
  float xv[kHeld], wv[kHeld];
  if (threadIdx.x < 32) {
    const float l = pipe_chains(buf, p);
    auto at = [&](int64_t k) { return xr[k]; };
    const float s = pipe_combine(l, cols, at, at);
    if (threadIdx.x == 0) {
      const float var = __fdiv_rn(s, static_cast<float>(cols));
      r_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
    }
  } else {
    const int n = static_cast<int>(cols), full = p.steps * 8;
    const int stride = static_cast<int>(lane_stride(p.steps));
    const int first_lane = pt & ~31;
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int i = pt + u * nprod;
      xv[u] = i < n ? xr[i] : 0.0f;
    }
    int done = 0;
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int i = pt + u * nprod;
      if (i < full) buf[(i & 7) * stride + (i >> 3)] = __fmul_rn(xv[u], xv[u]);
      pipe_arrive(p, (u + 1) * nprod + first_lane, done);
    }
    pipe_arrive_rest(p, done);
    // w's loads are issued here and land while warp 0 runs the chains.
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int i = pt + u * nprod;
      wv[u] = i < n ? w[i] : 0.0f;
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) return;
  const float r = r_shared;
  float* yr = y + blockIdx.x * cols;
#pragma unroll
  for (int u = 0; u < kHeld; ++u) {
    const int i = pt + u * nprod;
    if (i < static_cast<int>(cols)) yr[i] = round_bf16(__fmul_rn(wv[u], __fmul_rn(xv[u], r)));
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
