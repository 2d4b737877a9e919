// kernels::dot_f32's summation order (lane j sums the products j, j+8, j+16, ... in order, then
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the tail in order) with the products computed by the
// whole block first. Why: each lane is a dependent chain of n/8 fp32 adds, which no split can
// shorten without changing the bits; what a block can do is take everything else off the chain.
// All threads multiply (coalesced global loads, many in flight) into a shared buffer laid out by
// lane, so a lane's chain is one 16-byte shared load per four adds and runs at the add latency
// (about 4 cycles a step) instead of two scalar shared loads, a multiply and an add per step.
#pragma once

#include <cstdint>

namespace di::backend::cuda {

// Row stride (floats) of the by-lane product buffer for `steps` = n / 8 products per lane: a
// multiple of 4 (16-byte chain loads) that is 4 mod 32, so the eight lanes' 16-byte loads and
// a warp's scattered product stores both touch 32 distinct banks.
__host__ __device__ constexpr int64_t lane_stride(int64_t steps) {
  return (steps + 31) / 32 * 32 + 4;
}

// Bytes of the by-lane buffer of a dot product over n elements.
__host__ __device__ constexpr int64_t lane_buffer_bytes(int64_t n) {
  return 8 * lane_stride(n / 8) * static_cast<int64_t>(sizeof(float));
}

// All threads of the block: buf[(k % 8) * stride + k / 8] = a(k) * b(k) for k < n / 8 * 8 (the
// lanes' part; the caller adds the tail). Sixteen loads per operand are issued before the first
// multiply. The caller synchronizes before the chains read buf.
template <class A, class B>
__device__ __forceinline__ void products_by_lane(A a, B b, int64_t n, float* buf) {
  const int64_t full = n / 8 * 8, stride = lane_stride(n / 8);
  // 16 loads per operand in flight per thread: a 20,480-value product (hc_mixes at V4.1) by 256
  // threads is then five round trips instead of ten.
  constexpr int kBatch = 16;
  for (int64_t k0 = threadIdx.x; k0 < full; k0 += kBatch * int64_t{blockDim.x}) {
    float av[kBatch], bv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t k = k0 + u * int64_t{blockDim.x};
      av[u] = k < full ? a(k) : 0.0f;
      bv[u] = k < full ? b(k) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t k = k0 + u * int64_t{blockDim.x};
      if (k < full) buf[(k & 7) * stride + (k >> 3)] = __fmul_rn(av[u], bv[u]);
    }
  }
}

// Steps [s0, s1) of the chain at `row` continuing from l: float4 groups (s0 a multiple of 16 and
// of 4), the next group's loads issued before this group's adds, then the scalar remainder.
__device__ __forceinline__ float chain_range(const float* row, int s0, int s1, float l) {
  const float4* v = reinterpret_cast<const float4*>(row);
  const int vec = s0 + (s1 - s0) / 16 * 16;
  if (vec > s0) {
    float4 cur[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) cur[i] = v[s0 / 4 + i];
    for (int s = s0; s < vec; s += 16) {
      float4 next[4];
      const bool more = s + 16 < vec;
#pragma unroll
      for (int i = 0; i < 4; ++i) next[i] = more ? v[(s + 16) / 4 + i] : cur[i];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        l = __fadd_rn(l, cur[i].x);
        l = __fadd_rn(l, cur[i].y);
        l = __fadd_rn(l, cur[i].z);
        l = __fadd_rn(l, cur[i].w);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) cur[i] = next[i];
    }
  }
  for (int s = vec; s < s1; ++s) l = __fadd_rn(l, row[s]);
  return l;
}

// Lane `j`'s chain over its `steps` products at buf + j * lane_stride(steps), in order.
__device__ __forceinline__ float lane_chain(const float* buf, int j, int64_t steps) {
  return chain_range(buf + j * lane_stride(steps), 0, static_cast<int>(steps), 0.0f);
}

// dot_f32's fixed combine of the eight lane sums.
__device__ __forceinline__ float combine_lanes(const float* l) {
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                   __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
}

// The whole dot product over a by-lane buffer (products_by_lane, then a barrier): threads 0-7
// run the chains, thread 0 combines them and adds the tail a(k) * b(k), k >= n / 8 * 8, in
// order. Every thread of the block must call it (it synchronizes); the result is valid in
// thread 0. `lanes` is 8 floats of shared scratch.
template <class A, class B>
__device__ __forceinline__ float lane_dot(const float* buf, int64_t n, A a, B b, float* lanes) {
  if (threadIdx.x < 8) lanes[threadIdx.x] = lane_chain(buf, static_cast<int>(threadIdx.x), n / 8);
  __syncthreads();
  float s = 0;
  if (threadIdx.x == 0) {
    s = combine_lanes(lanes);
    for (int64_t k = n / 8 * 8; k < n; ++k) s = __fadd_rn(s, __fmul_rn(a(k), b(k)));
  }
  return s;
}

}  // namespace di::backend::cuda
