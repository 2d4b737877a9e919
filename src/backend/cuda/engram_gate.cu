// Engram gate (kernels::engram_gate_row): per (row, hc copy) block, three dot_f32 lane chains
// (|x|^2, |key|^2, x.w.key), then the sigmoid gate and x += gate * value, bf16-rounded. Bitwise
// except where exp rounds differently from glibc's. Rows up to kHeldDim: warps 1.. load x, key
// and w once (x kept in registers) and stream the three products by lane into shared memory
// while warp 0's lanes 0-23 run the 24 chains side by side (lane_pipe.cuh), then load value
// and update x from the registers. Longer rows: the chains over shared-memory copies of the
// three vectors (or global memory where they do not fit).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_pipe.cuh"
#include "backend/cuda/lane_sum.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

constexpr int kHeldThreads = 512;
constexpr int kHeldPer = 16;  // elements per producer thread kept in registers
constexpr int64_t kHeldDim = int64_t{kHeldThreads - 32} * kHeldPer;

// The gate from the three sums (the tail d >= full added in order), as kernels::engram_gate_row.
__device__ __forceinline__ float engram_gate_value(float s0,
                                                   float s1,
                                                   float s2,
                                                   const float* xk,
                                                   const float* key,
                                                   const float* wk,
                                                   int64_t dim,
                                                   float eps,
                                                   float inv_sqrt_dim) {
  float s[3] = {s0, s1, s2};
  for (int64_t d = dim / 8 * 8; d < dim; ++d) {
    s[0] = __fadd_rn(s[0], __fmul_rn(xk[d], xk[d]));
    s[1] = __fadd_rn(s[1], __fmul_rn(key[d], key[d]));
    s[2] = __fadd_rn(s[2], __fmul_rn(__fmul_rn(xk[d], wk[d]), key[d]));
  }
  const float fd = static_cast<float>(dim);
  const float rstd = __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s[0], fd), eps))),
                               __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s[1], fd), eps))));
  const float dot = __fmul_rn(__fmul_rn(s[2], rstd), inv_sqrt_dim);
  const float mag = __fsqrt_rn(fmaxf(fabsf(dot), 1e-6f));
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-copysignf(mag, dot))));
}

// Dynamic shared memory: the three by-lane product buffers, 3 * lane_buffer_bytes(dim).
__global__ void __launch_bounds__(kHeldThreads) engram_gate_held_kernel(float* x,
                                                                        const float* kv,
                                                                        const float* qk_weight,
                                                                        int hc,
                                                                        int64_t dim,
                                                                        float eps,
                                                                        float inv_sqrt_dim) {
  pdl::enter_dependent_grid();
  extern __shared__ float4 engram_held4[];
  __shared__ float gate;
  float* buf = reinterpret_cast<float*>(engram_held4);
  const int64_t r = blockIdx.x / hc;
  const int k = static_cast<int>(blockIdx.x % hc);
  float* x_out = x + (r * hc + k) * dim;
  const float* row_kv = kv + r * (hc + 1) * dim;
  const float* key = row_kv + k * dim;
  const float* value = row_kv + hc * dim;
  const float* wk = qk_weight + k * dim;
  const PipePlan p = pipe_plan(dim);
  const int pt = static_cast<int>(threadIdx.x) - 32, nprod = kHeldThreads - 32;
  float xv[kHeldPer], vv[kHeldPer];
  if (threadIdx.x < 32) {
    const float l = pipe_chains(buf, p, 24);
    const float s0 = pipe_lane_sum(l, 0), s1 = pipe_lane_sum(l, 8), s2 = pipe_lane_sum(l, 16);
    if (threadIdx.x == 0)
      gate = engram_gate_value(s0, s1, s2, x_out, key, wk, dim, eps, inv_sqrt_dim);
  } else {
    const int n = static_cast<int>(dim), full = p.steps * 8;
    const int stride = static_cast<int>(lane_stride(p.steps));
    const int first_lane = pt & ~31;
    float kk[kHeldPer], ww[kHeldPer];
#pragma unroll
    for (int u = 0; u < kHeldPer; ++u) {
      const int i = pt + u * nprod;
      xv[u] = i < n ? x_out[i] : 0.0f;
      kk[u] = i < full ? key[i] : 0.0f;
      ww[u] = i < full ? wk[i] : 0.0f;
    }
    int done = 0;
#pragma unroll
    for (int u = 0; u < kHeldPer; ++u) {
      const int i = pt + u * nprod;
      if (i < full) {
        float* at = buf + (i & 7) * stride + (i >> 3);
        at[0] = __fmul_rn(xv[u], xv[u]);
        at[8 * stride] = __fmul_rn(kk[u], kk[u]);
        at[16 * stride] = __fmul_rn(__fmul_rn(xv[u], ww[u]), kk[u]);
      }
      pipe_arrive(p, (u + 1) * nprod + first_lane, done);
    }
    pipe_arrive_rest(p, done);
    // value's loads are issued here and land while warp 0 runs the chains.
#pragma unroll
    for (int u = 0; u < kHeldPer; ++u) {
      const int i = pt + u * nprod;
      vv[u] = i < n ? value[i] : 0.0f;
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) return;
  const float g = gate;
#pragma unroll
  for (int u = 0; u < kHeldPer; ++u) {
    const int i = pt + u * nprod;
    if (i < static_cast<int>(dim)) x_out[i] = round_bf16(__fadd_rn(xv[u], __fmul_rn(g, vv[u])));
  }
}

// kStaged: the three vectors of the block's chains are first copied to shared memory (dynamic,
// 3 * dim floats), so the lanes' loads are shared-memory round trips, not global ones.
template <bool kStaged>
__global__ void engram_gate_kernel(float* x,
                                   const float* kv,
                                   const float* qk_weight,
                                   int hc,
                                   int64_t dim,
                                   float eps,
                                   float inv_sqrt_dim) {
  pdl::enter_dependent_grid();
  extern __shared__ float4 engram_staged4[];
  __shared__ float lanes[3][8];
  __shared__ float gate;
  const int64_t r = blockIdx.x / hc;
  const int k = static_cast<int>(blockIdx.x % hc);
  float* x_out = x + (r * hc + k) * dim;
  const float* row_kv = kv + r * (hc + 1) * dim;
  const float* key = row_kv + k * dim;
  const float* value = row_kv + hc * dim;
  const float* wk = qk_weight + k * dim;
  const float* xk = x_out;
  if constexpr (kStaged) {
    float* staged = reinterpret_cast<float*>(engram_staged4);
    stage_to_shared(xk, staged, dim);
    stage_to_shared(key, staged + dim, dim);
    stage_to_shared(wk, staged + 2 * dim, dim);
    __syncthreads();
    xk = staged;
    key = staged + dim;
    wk = staged + 2 * dim;
  }
  const int64_t full = dim / 8 * 8;
  if (threadIdx.x < 8) {
    float hx = 0, kk = 0, dot = 0;
    auto add = [&](float xv, float kv_, float wv) {
      hx = __fadd_rn(hx, __fmul_rn(xv, xv));
      kk = __fadd_rn(kk, __fmul_rn(kv_, kv_));
      dot = __fadd_rn(dot, __fmul_rn(__fmul_rn(xv, wv), kv_));
    };
    // Each lane's three chains are sequential: their loads go kAhead steps ahead.
    constexpr int kAhead = 8;
    int64_t d = threadIdx.x;
    for (; d + 8 * (kAhead - 1) < full; d += 8 * kAhead) {
      float xv[kAhead], kv_[kAhead], wv[kAhead];
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        xv[i] = xk[d + 8 * i];
        kv_[i] = key[d + 8 * i];
        wv[i] = wk[d + 8 * i];
      }
#pragma unroll
      for (int i = 0; i < kAhead; ++i) add(xv[i], kv_[i], wv[i]);
    }
    for (; d < full; d += 8) add(xk[d], key[d], wk[d]);
    lanes[0][threadIdx.x] = hx;
    lanes[1][threadIdx.x] = kk;
    lanes[2][threadIdx.x] = dot;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s[3];
    for (int q = 0; q < 3; ++q) {
      const float* l = lanes[q];
      s[q] = __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                       __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
    }
    gate = engram_gate_value(s[0], s[1], s[2], xk, key, wk, dim, eps, inv_sqrt_dim);
  }
  __syncthreads();
  // Batches of loads before their stores: x_out may alias value as far as the compiler knows,
  // so a plain loop waits for each value's load after the previous store (~12 us per token).
  constexpr int kBatch = 8;
  const float g = gate;
  for (int64_t i0 = threadIdx.x; i0 < dim; i0 += kBatch * int64_t{blockDim.x}) {
    float xv[kBatch], vv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = i0 + u * int64_t{blockDim.x};
      xv[u] = i < dim ? xk[i] : 0.0f;
      vv[u] = i < dim ? value[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t i = i0 + u * int64_t{blockDim.x};
      if (i < dim) x_out[i] = round_bf16(__fadd_rn(xv[u], __fmul_rn(g, vv[u])));
    }
  }
}

}  // namespace

cudaError_t engram_gate(float* x,
                        const float* kv,
                        const float* qk_weight,
                        int64_t rows,
                        int hc,
                        int64_t dim,
                        float eps,
                        float inv_sqrt_dim,
                        cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows * hc);
  const size_t staged = 3 * static_cast<size_t>(dim) * sizeof(float);
  int device = 0, optin = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (e != cudaSuccess) return e;
  const size_t held = 3 * static_cast<size_t>(lane_buffer_bytes(dim));
  if (dim <= kHeldDim && held + 1024 <= static_cast<size_t>(optin)) {
    e = cudaFuncSetAttribute(engram_gate_held_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(held));
    if (e != cudaSuccess) return e;
    pdl::launch_dependent(engram_gate_held_kernel, dim3(blocks), dim3(kHeldThreads), held, s, x, kv,
                          qk_weight, hc, dim, eps, inv_sqrt_dim);
  } else if (staged + 1024 <= static_cast<size_t>(optin)) {
    e = cudaFuncSetAttribute(engram_gate_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(staged));
    if (e != cudaSuccess) return e;
    pdl::launch_dependent(engram_gate_kernel<true>, dim3(blocks), dim3(kThreads), staged, s, x, kv,
                          qk_weight, hc, dim, eps, inv_sqrt_dim);
  } else {
    pdl::launch_dependent(engram_gate_kernel<false>, dim3(blocks), dim3(kThreads), 0, s, x, kv,
                          qk_weight, hc, dim, eps, inv_sqrt_dim);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
