// Two e4m3 values (low byte first, in a 16-bit register) to bf16x2, exactly: e4m3 -> f16 is exact,
// and so is f16 -> f32 -> bf16 for values of 4 significant bits. The conversion of the tensor
// path's FP8 weights into bf16 MMA operands (gemm_wgmma_bf16.cu, gemm_bf16_decode.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace di::backend::cuda {

__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint16_t v) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(v));
  __half2 h2;
  memcpy(&h2, &h, 4);
  const __nv_bfloat162 b = __float22bfloat162_rn(__half22float2(h2));
  uint32_t r;
  memcpy(&r, &b, 4);
  return r;
}

// The mma.m16n8k16 A fragments of both k16 halves from a lane's 16 bytes of the lane-order
// weight layout (wgmma_bf16_layout.cu: row g8 k 2q, 2q+1, 2q+8, 2q+9, the same + 16, then row
// g8 + 8 likewise), for gemm_wgmma_bf16.cu's `frag` and gemm_bf16_decode.cu's block sums.
__device__ __forceinline__ void lane_order_frags(const uint4& v,
                                                 uint32_t (&a0)[4],
                                                 uint32_t (&a1)[4]) {
  a0[0] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.x));
  a0[2] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.x >> 16));
  a1[0] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.y));
  a1[2] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.y >> 16));
  a0[1] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.z));
  a0[3] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.z >> 16));
  a1[1] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.w));
  a1[3] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v.w >> 16));
}

}  // namespace di::backend::cuda
