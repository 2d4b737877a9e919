// Device helpers of the tensor-core FP8 GEMMs (gemm_tc.cu, gemm_tc_decode.cu): async copies,
// ldmatrix, the e4m3 MMA, and act_quant for one 32-block held one element per lane.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"

namespace di::backend::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte (or 4-byte) async copy; src_bytes = 0 zero-fills (rows past M or N, blocks past K).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}

// d = A(16x32 e4m3) . B(32x8 e4m3) + 0 in fp32.
__device__ __forceinline__ void mma_e4m3(float (&d)[4],
                                         const uint32_t (&a)[4],
                                         uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#else
  // Unreachable: the launcher refuses devices below sm_89.
  d[0] = d[1] = d[2] = d[3] = 0.0f;
#endif
}

// act_quant of one 32-block, element `v` in this lane (the whole warp calls it): the operations
// of quantize_fp8 (elementwise.cu), so the same value `q` and power-of-two scale `scale`. The max
// is exact, so the shuffle order does not matter.
__device__ __forceinline__ void act_quant_lane(float v, float& q, float& scale) {
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  amax = fmaxf(amax, 1e-4f);
  scale = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  q = round_e4m3(fminf(fmaxf(__fdiv_rn(v, scale), -448.0f), 448.0f));
}

// The e4m3 byte of a value that already is an e4m3 value (exact, no rounding).
__device__ __forceinline__ uint8_t e4m3_byte(float q) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
}

}  // namespace di::backend::cuda
