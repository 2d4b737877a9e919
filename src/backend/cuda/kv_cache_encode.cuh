// Encoding of exact e4m3 and e2m1 values into their codes, shared by the KV writers
// (kv_cache_write.cu at 512 dims from bf16, kv_cache_codec.cu at any head_dim from fp32).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace di::backend::cuda {

// The e4m3 byte of an e4m3 value (exact: no rounding happens).
__device__ __forceinline__ uint32_t e4m3_code(float exact) {
  return static_cast<uint32_t>(__nv_cvt_float_to_fp8(exact, __NV_SATFINITE, __NV_E4M3));
}

// tensor/numeric.h float_to_e2m1: nearest code, ties to the even code.
__device__ __forceinline__ uint32_t e2m1_code(float f) {
  const float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const bool kTieUp[7] = {false, true, false, true, false, true, false};
  const float a = fabsf(f);
  uint32_t code = 0;
#pragma unroll
  for (int i = 0; i < 7; ++i) {
    if (a > kMid[i] || (a == kMid[i] && kTieUp[i])) code = static_cast<uint32_t>(i + 1);
  }
  return code | (signbit(f) ? 8u : 0u);
}

}  // namespace di::backend::cuda
