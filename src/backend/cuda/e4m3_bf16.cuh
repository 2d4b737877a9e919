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

}  // namespace di::backend::cuda
