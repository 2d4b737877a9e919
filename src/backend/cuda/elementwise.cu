// Row-wise kernels: quantizers, RoPE, SwiGLU, hyper-connection collapse/expand, the
// Engram gate and the compressor's softmax pooling, each computing exactly what its kernels/ref
// twin computes (same operation order, explicit round-to-nearest arithmetic): one thread per
// element (the quantizers: a lane per element, a warp or half warp per block).
#include <cstdint>
#include <limits>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

__device__ float block_amax(const float* x, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

__global__ void fake_quant_fp8_kernel(float* x, int64_t num_blocks, int block) {
  pdl::enter_dependent_grid();
  const int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (b >= num_blocks) return;
  float* xb = x + b * block;
  const float amax = fmaxf(block_amax(xb, block), 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  for (int i = 0; i < block; ++i) {
    const float v = fminf(fmaxf(__fdiv_rn(xb[i], s), -448.0f), 448.0f);
    xb[i] = round_bf16(__fmul_rn(round_e4m3(v), s));
  }
}

// A group of `width` lanes (16 or 32) per quantization block, one element per lane: the block's
// amax is a max (order-free), so the shuffle tree gives the sequential loop's scale. Lanes past
// the end hold 0 and form whole groups of their own (n is a multiple of the width).
template <int width>
__device__ __forceinline__ float group_amax(float v) {
  for (int o = width / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_amax(float v) {
  return group_amax<32>(v);
}

// fake_quant_fp8 with 32-blocks (the model's), a lane per element instead of a thread per block.
__global__ void fake_quant_fp8_lanes_kernel(float* x, int64_t n) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const bool live = i < n;
  const float v = live ? x[i] : 0.0f;
  const float amax = fmaxf(warp_amax(fabsf(v)), 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  const float q = round_e4m3(fminf(fmaxf(__fdiv_rn(v, s), -448.0f), 448.0f));
  if (live) x[i] = round_bf16(__fmul_rn(q, s));
}

__global__ void quantize_fp8_kernel(const float* x, int64_t num_blocks, float* q, float* scales) {
  pdl::enter_dependent_grid();
  const int64_t b = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (b >= num_blocks) return;  // whole warps leave together (blockDim is a multiple of 32)
  const float v = x[b * 32 + lane];
  const float amax = fmaxf(warp_amax(fabsf(v)), 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  if (lane == 0) scales[b] = s;
  q[b * 32 + lane] = round_e4m3(fminf(fmaxf(__fdiv_rn(v, s), -448.0f), 448.0f));
}

// fake_quant_fp4, a lane per element (16-lane groups for e4m3 scales, warps for ue8m0).
template <bool kE4m3>
__global__ void fake_quant_fp4_kernel(float* x, int64_t n) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const bool live = i < n;
  const float v = live ? x[i] : 0.0f;
  float amax = group_amax < kE4m3 ? 16 : 32 > (fabsf(v));
  float s;
  if (kE4m3) {
    amax = fmaxf(amax, 6.0f * 0.001953125f);
    s = round_e4m3(__fdiv_rn(amax, 6.0f));
  } else {
    amax = fmaxf(amax, 6.0f * __uint_as_float(0x00800000u));  // 6 * 2^-126
    s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 6.0f)));
  }
  const float q = round_e2m1(fminf(fmaxf(__fdiv_rn(v, s), -6.0f), 6.0f));
  if (live) x[i] = round_bf16(__fmul_rn(q, s));
}

// Idx: int when rows * num_heads * num_freq fits (every decode step), so the flat index splits
// by 32-bit divisions; int64_t divisions are a ~70-instruction routine each, three of them ahead
// of the loads. inv_freq is the RoPE table (a constant no kernel writes): its load is issued
// before the grid dependency; every thread still waits before it touches x or positions.
template <class Idx>
__global__ void rope_kernel(float* x,
                            int64_t rows,
                            int64_t row_stride,
                            int num_heads,
                            int head_dim,
                            int rope_offset,
                            const int64_t* positions,
                            const float* inv_freq,
                            int num_freq,
                            bool inverse) {
  const Idx t =
      static_cast<Idx>(blockIdx.x) * static_cast<Idx>(blockDim.x) + static_cast<Idx>(threadIdx.x);
  const bool live = t < static_cast<Idx>(rows) * num_heads * num_freq;
  const int i = static_cast<int>(t % num_freq);
  const float freq = live ? inv_freq[i] : 0.0f;
  pdl::enter_dependent_grid();
  if (!live) return;
  const int h = static_cast<int>(t / num_freq % num_heads);
  const int64_t r = static_cast<int64_t>(t / num_freq / num_heads);
  float* p = x + r * row_stride + static_cast<int64_t>(h) * head_dim + rope_offset + 2 * i;
  const float angle = __fmul_rn(static_cast<float>(positions[r]), freq);
  const float c = static_cast<float>(cos(static_cast<double>(angle)));
  const float sn = static_cast<float>(sin(static_cast<double>(angle)));
  const float s = inverse ? -sn : sn;
  const float a = p[0], b = p[1];
  p[0] = round_bf16(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
  p[1] = round_bf16(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
}

__global__ void swiglu_kernel(const float* g,
                              const float* u,
                              int64_t rows,
                              int64_t cols,
                              const float* row_weight,
                              float limit,
                              float* out) {
  pdl::enter_dependent_grid();
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= rows * cols) return;
  float gate = g[t], up = u[t];
  if (limit > 0) {
    up = fminf(fmaxf(up, -limit), limit);
    gate = fminf(gate, limit);
  }
  const float silu = __fdiv_rn(gate, __fadd_rn(1.0f, exp_f32(-gate)));
  const float rw = row_weight ? row_weight[t / cols] : 1.0f;
  out[t] = round_bf16(__fmul_rn(rw, __fmul_rn(silu, up)));
}

__global__ void hc_collapse_kernel(
    const float* x, const float* pre, int64_t rows, int hc, int64_t dim, float* y) {
  pdl::enter_dependent_grid();
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= rows * dim) return;
  const int64_t r = t / dim, d = t % dim;
  float s = 0;
  for (int k = 0; k < hc; ++k)
    s = __fadd_rn(s, __fmul_rn(pre[r * hc + k], x[(r * hc + k) * dim + d]));
  y[t] = round_bf16(s);
}

__global__ void hc_expand_kernel(const float* y,
                                 const float* residual,
                                 const HcCoefficients* coeff,
                                 int64_t rows,
                                 int hc,
                                 int64_t dim,
                                 float* out) {
  pdl::enter_dependent_grid();
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= rows * dim) return;
  const int64_t d = t % dim, r = t / dim;
  const HcCoefficients& c = coeff[r];
  // One thread per (row, column) reads every copy before it writes any: out may be residual.
  float res[HcCoefficients::kMaxHc];
  for (int i = 0; i < hc; ++i) res[i] = residual[(r * hc + i) * dim + d];
  const float yv = y[r * dim + d];
  for (int j = 0; j < hc; ++j) {
    float mixed = 0;
    for (int i = 0; i < hc; ++i) mixed = __fadd_rn(mixed, __fmul_rn(c.comb[i * hc + j], res[i]));
    out[(r * hc + j) * dim + d] = round_bf16(__fadd_rn(__fmul_rn(c.post[j], yv), mixed));
  }
}

// The same two ops four columns a thread (dim % 4 == 0, 16-byte aligned rows), with 32-bit
// index arithmetic: the one-value kernels above spent most of their instructions on 64-bit
// divisions of the flat index (hc_expand at 256 rows: 46 us for 46 MB). Each output takes the
// same operations in the same order as there.
// kHc > 0: hc as a compile-time constant (V4.1's 4), so the loops unroll and every load of a
// thread is issued before the first add; 0: hc at run time.
template <int kHc>
__global__ void hc_collapse4_kernel(
    const float4* x, const float* pre, int rows, int hc_runtime, int dim4, float4* y) {
  pdl::enter_dependent_grid();
  const int hc = kHc > 0 ? kHc : hc_runtime;
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= rows * dim4) return;
  const int r = t / dim4, d = t - r * dim4;
  float4 s = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int k = 0; k < hc; ++k) {
    const float p = pre[r * hc + k];
    const float4 v = x[static_cast<int64_t>(r * hc + k) * dim4 + d];
    s = make_float4(__fadd_rn(s.x, __fmul_rn(p, v.x)), __fadd_rn(s.y, __fmul_rn(p, v.y)),
                    __fadd_rn(s.z, __fmul_rn(p, v.z)), __fadd_rn(s.w, __fmul_rn(p, v.w)));
  }
  y[t] = make_float4(round_bf16(s.x), round_bf16(s.y), round_bf16(s.z), round_bf16(s.w));
}

// One thread per (row, four columns) writes those columns of every copy j (the hc residual
// copies are read once for all of them).
// kHc as for hc_collapse4_kernel: with hc at run time the residual copies (a float4 array indexed
// by loop counters) lived in a 128-byte stack frame (ptxas -v), a local-memory round trip each.
template <int kHc>
__global__ void hc_expand4_kernel(const float4* y,
                                  const float4* residual,
                                  const HcCoefficients* coeff,
                                  int rows,
                                  int hc_runtime,
                                  int dim4,
                                  float4* out) {
  pdl::enter_dependent_grid();
  const int hc = kHc > 0 ? kHc : hc_runtime;
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= rows * dim4) return;
  const int r = t / dim4, d = t - r * dim4;
  const HcCoefficients& c = coeff[r];
  const int64_t row = static_cast<int64_t>(r) * hc * dim4;
  float4 res[HcCoefficients::kMaxHc];
#pragma unroll
  for (int i = 0; i < hc; ++i) res[i] = residual[row + static_cast<int64_t>(i) * dim4 + d];
  const float4 yv = y[t];
#pragma unroll
  for (int j = 0; j < hc; ++j) {
    float4 m = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < hc; ++i) {
      const float w = c.comb[i * hc + j];
      m = make_float4(
          __fadd_rn(m.x, __fmul_rn(w, res[i].x)), __fadd_rn(m.y, __fmul_rn(w, res[i].y)),
          __fadd_rn(m.z, __fmul_rn(w, res[i].z)), __fadd_rn(m.w, __fmul_rn(w, res[i].w)));
    }
    const float p = c.post[j];
    out[row + static_cast<int64_t>(j) * dim4 + d] =
        make_float4(round_bf16(__fadd_rn(__fmul_rn(p, yv.x), m.x)),
                    round_bf16(__fadd_rn(__fmul_rn(p, yv.y), m.y)),
                    round_bf16(__fadd_rn(__fmul_rn(p, yv.z), m.z)),
                    round_bf16(__fadd_rn(__fmul_rn(p, yv.w), m.w)));
  }
}

// Whether the four-column kernels take rows x (hc copies of) dim: whole float4s, 16-byte aligned
// rows, 32-bit thread indices, hc within HcCoefficients.
bool four_columns(const void* a, const void* b, const void* c, int64_t rows, int hc, int64_t dim) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return dim % 4 == 0 && aligned(a) && aligned(b) && aligned(c) && hc >= 1 &&
         hc <= HcCoefficients::kMaxHc && rows * hc * dim < (int64_t{1} << 31);
}

// One block per (row, copy k); threads 0..7 run the chains of the three row reductions.
// Compressor pooling (kernels::softmax_pool_channels): one thread per channel, the group loop in
// the CPU's order. exp is recomputed in the last loop (the same value) rather than kept in a
// per-thread array, so any group size works without local memory.
__global__ void softmax_pool_kernel(
    const float* const* kvs, const float* const* scores, int group, int64_t dim, float* outs) {
  pdl::enter_dependent_grid();
  const int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (d >= dim) return;
  const float* kv = kvs[blockIdx.y];
  const float* score = scores[blockIdx.y];
  float* out = outs + blockIdx.y * dim;
  float mx = -INFINITY;
  for (int i = 0; i < group; ++i) mx = fmaxf(mx, score[i * dim + d]);
  float sum = 0;
  for (int i = 0; i < group; ++i) sum = __fadd_rn(sum, exp_f32(__fsub_rn(score[i * dim + d], mx)));
  float acc = 0;
  for (int i = 0; i < group; ++i) {
    const float e = exp_f32(__fsub_rn(score[i * dim + d], mx));
    acc = __fadd_rn(acc, __fmul_rn(kv[i * dim + d], __fdiv_rn(e, sum)));
  }
  out[d] = acc;
}

}  // namespace

cudaError_t softmax_pool(const float* const* kv,
                         const float* const* score,
                         int64_t groups,
                         int group,
                         int64_t dim,
                         float* out,
                         cudaStream_t s) {
  if (dim == 0 || groups == 0) return cudaSuccess;
  if (groups > 65535) return cudaErrorInvalidValue;  // grid.y; the caller chunks
  const dim3 grid(static_cast<unsigned>(grid_for(dim)), static_cast<unsigned>(groups));
  pdl::launch_dependent(softmax_pool_kernel, dim3(grid), dim3(kThreads), 0, s, kv, score, group,
                        dim, out);
  return cudaGetLastError();
}

cudaError_t fake_quant_fp8(float* x, int64_t rows, int64_t cols, int block, cudaStream_t s) {
  const int64_t n = rows * (cols / block);
  if (n == 0) return cudaSuccess;
  if (block == 32) {
    pdl::launch_dependent(fake_quant_fp8_lanes_kernel, dim3(grid_for(n * 32)), dim3(kThreads), 0, s,
                          x, n * 32);
  } else {
    pdl::launch_dependent(fake_quant_fp8_kernel, dim3(grid_for(n)), dim3(kThreads), 0, s, x, n,
                          block);
  }
  return cudaGetLastError();
}

cudaError_t quantize_fp8(
    const float* x, int64_t rows, int64_t cols, float* q, float* scales, cudaStream_t s) {
  const int64_t n = rows * (cols / 32);
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(quantize_fp8_kernel, dim3(grid_for(n * 32)), dim3(kThreads), 0, s, x, n, q,
                        scales);
  return cudaGetLastError();
}

cudaError_t fake_quant_fp4(
    float* x, int64_t rows, int64_t cols, Fp4ScaleKind kind, cudaStream_t s) {
  const bool e4m3 = kind == Fp4ScaleKind::kE4m3Block16;
  const int64_t n = rows * (cols / (e4m3 ? 16 : 32)) * (e4m3 ? 16 : 32);  // whole blocks
  if (n == 0) return cudaSuccess;
  if (e4m3) {
    pdl::launch_dependent(fake_quant_fp4_kernel<true>, dim3(grid_for(n)), dim3(kThreads), 0, s, x,
                          n);
  } else {
    pdl::launch_dependent(fake_quant_fp4_kernel<false>, dim3(grid_for(n)), dim3(kThreads), 0, s, x,
                          n);
  }
  return cudaGetLastError();
}

cudaError_t rope(float* x,
                 int64_t rows,
                 int64_t row_stride,
                 int num_heads,
                 int head_dim,
                 int rope_offset,
                 const int64_t* positions,
                 const float* inv_freq,
                 int num_freq,
                 bool inverse,
                 cudaStream_t s) {
  const int64_t n = rows * num_heads * num_freq;
  if (n == 0) return cudaSuccess;
  const bool small = n <= std::numeric_limits<int32_t>::max() - kThreads;
  pdl::launch_dependent(small ? rope_kernel<int32_t> : rope_kernel<int64_t>, dim3(grid_for(n)),
                        dim3(kThreads), 0, s, x, rows, row_stride, num_heads, head_dim, rope_offset,
                        positions, inv_freq, num_freq, inverse);
  return cudaGetLastError();
}

cudaError_t swiglu(const float* gate,
                   const float* up,
                   int64_t rows,
                   int64_t cols,
                   const float* row_weight,
                   float limit,
                   float* out,
                   cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(swiglu_kernel, dim3(grid_for(n)), dim3(kThreads), 0, s, gate, up, rows,
                        cols, row_weight, limit, out);
  return cudaGetLastError();
}

cudaError_t hc_collapse(
    const float* x, const float* pre, int64_t rows, int hc, int64_t dim, float* y, cudaStream_t s) {
  const int64_t n = rows * dim;
  if (n == 0) return cudaSuccess;
  if (four_columns(x, y, x, rows, hc, dim)) {
    pdl::launch_dependent(hc == 4 ? hc_collapse4_kernel<4> : hc_collapse4_kernel<0>,
                          dim3(grid_for(n / 4)), dim3(kThreads), 0, s,
                          reinterpret_cast<const float4*>(x), pre, static_cast<int>(rows), hc,
                          static_cast<int>(dim / 4), reinterpret_cast<float4*>(y));
    return cudaGetLastError();
  }
  pdl::launch_dependent(hc_collapse_kernel, dim3(grid_for(n)), dim3(kThreads), 0, s, x, pre, rows,
                        hc, dim, y);
  return cudaGetLastError();
}

cudaError_t hc_expand(const float* y,
                      const float* residual,
                      const HcCoefficients* coeff,
                      int64_t rows,
                      int hc,
                      int64_t dim,
                      float* out,
                      cudaStream_t s) {
  const int64_t n = rows * hc * dim;
  if (n == 0) return cudaSuccess;
  if (four_columns(y, residual, out, rows, hc, dim)) {
    pdl::launch_dependent(hc == 4 ? hc_expand4_kernel<4> : hc_expand4_kernel<0>,
                          dim3(grid_for(rows * dim / 4)), dim3(kThreads), 0, s,
                          reinterpret_cast<const float4*>(y),
                          reinterpret_cast<const float4*>(residual), coeff, static_cast<int>(rows),
                          hc, static_cast<int>(dim / 4), reinterpret_cast<float4*>(out));
    return cudaGetLastError();
  }
  if (hc < 1 || hc > HcCoefficients::kMaxHc) return cudaErrorInvalidValue;
  pdl::launch_dependent(hc_expand_kernel, dim3(grid_for(rows * dim)), dim3(kThreads), 0, s, y,
                        residual, coeff, rows, hc, dim, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
