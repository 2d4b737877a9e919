// kernels::dot_f32's summation order (eight interleaved lanes, each product rounded then added,
// combined ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the tail in order) for a block that has its
// vectors in shared memory. Each lane is a dependent chain of n/8 adds, so a dot product over
// global memory is latency-bound (one load round trip per step unless the loads run ahead);
// staged first by the whole block with wide loads, the chains run at the add latency.
#pragma once

#include <cstdint>

namespace di::backend::cuda {

// All threads of the block copy n floats from global `src` to shared `dst`: 16-byte cp.async
// copies when both are 16-byte aligned and n % 4 == 0 (every copy in flight at once; a
// load-then-store loop would wait one round trip per iteration), else a plain loop. The caller
// synchronizes (__syncthreads) before reading dst.
__device__ __forceinline__ void stage_to_shared(const float* __restrict__ src,
                                                float* __restrict__ dst,
                                                int64_t n) {
  const bool wide = (reinterpret_cast<uintptr_t>(src) % 16 == 0) &&
                    (reinterpret_cast<uintptr_t>(dst) % 16 == 0) && n % 4 == 0;
  if (wide) {
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst + 4 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + 4 * i)
                   : "memory");
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

// Element k of a shared-memory vector as fp32: floats as they are, bf16 bits widened (exact).
__device__ __forceinline__ float shared_at(const float* v, int64_t k) {
  return v[k];
}
__device__ __forceinline__ float shared_at(const uint16_t* v, int64_t k) {
  return __uint_as_float(static_cast<uint32_t>(v[k]) << 16);
}

// dot_f32(a, b, n) over shared memory: threads 0-7 run one lane each (loads issued 16 steps
// ahead of the adds), thread 0 combines them and adds the tail. Every thread of the block must
// call it (it synchronizes); the result is valid in thread 0. `lanes` is 8 floats of shared
// scratch.
template <class B>
__device__ __forceinline__ float lane_dot_shared(const float* a,
                                                 const B* b,
                                                 int64_t n,
                                                 float* lanes) {
  const int64_t full = n / 8 * 8;
  if (threadIdx.x < 8) {
    float l = 0;
    int64_t k = threadIdx.x;
    constexpr int kAhead = 16;
    for (; k + 8 * (kAhead - 1) < full; k += 8 * kAhead) {
      float p[kAhead];
#pragma unroll
      for (int i = 0; i < kAhead; ++i) p[i] = __fmul_rn(a[k + 8 * i], shared_at(b, k + 8 * i));
#pragma unroll
      for (int i = 0; i < kAhead; ++i) l = __fadd_rn(l, p[i]);
    }
    for (; k < full; k += 8) l = __fadd_rn(l, __fmul_rn(a[k], shared_at(b, k)));
    lanes[threadIdx.x] = l;
  }
  __syncthreads();
  float s = 0;
  if (threadIdx.x == 0) {
    s = __fadd_rn(__fadd_rn(__fadd_rn(lanes[0], lanes[1]), __fadd_rn(lanes[2], lanes[3])),
                  __fadd_rn(__fadd_rn(lanes[4], lanes[5]), __fadd_rn(lanes[6], lanes[7])));
    for (int64_t k = full; k < n; ++k) s = __fadd_rn(s, __fmul_rn(a[k], shared_at(b, k)));
  }
  return s;
}

}  // namespace di::backend::cuda
