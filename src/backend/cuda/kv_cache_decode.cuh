// Decoding of the stored KV formats (sparse_attention_fp8.h) to bf16 with integer ops and one
// packed bf16 multiply per two values, no conversion instructions (their throughput is a
// sixteenth of the ALUs'). Values come out times kKeyShift = 2^-32: that keeps every multiplier
// representable (an e2m1 subnormal needs 2^126 times its e4m3 scale), and the attention kernel
// undoes it exactly (powers of two, far from bf16's range limits). Every decoded value is exact:
// an e4m3 or e2m1 value times a power of two or an e4m3 scale has at most 8 significant bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"

namespace di::backend::cuda {

inline constexpr float kKeyShift = 2.3283064365386963e-10f;  // 2^-32
inline constexpr float kKeyUnshift = 4294967296.0f;          // 2^32

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162*>(&a);
  __nv_bfloat162 y = *reinterpret_cast<__nv_bfloat162*>(&b);
  __nv_bfloat162 r = __hmul2(x, y);
  return *reinterpret_cast<uint32_t*>(&r);
}

// Two e4m3 bytes (in bits 0-7 and 16-23 of u) placed as bf16 fields: value = e4m3 * 2^-120,
// subnormal codes included (they land on bf16 subnormals with the same scaling).
__device__ __forceinline__ uint32_t e4m3_pair_bits(uint32_t u) {
  return ((u & 0x00800080u) << 8) | ((u & 0x007f007fu) << 4);
}

// 16 e4m3 codes (one 16-byte load) with ue8m0 scale byte e -> 16 bf16 (8 words) times 2^-32.
__device__ __forceinline__ void decode_fp8x16(const uint4 codes, uint32_t e, uint32_t (&out)[8]) {
  // 2^120 (code placement) * 2^(e-127) (scale) * 2^-32 (shift) = 2^(e-39): bf16 exponent e+88.
  const uint32_t m = min(e + 88u, 255u) << 7;
  const uint32_t mult = m | (m << 16);
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16x2_mul(e4m3_pair_bits(__byte_perm(w[i], 0, 0x4140)), mult);
    out[2 * i + 1] = bf16x2_mul(e4m3_pair_bits(__byte_perm(w[i], 0, 0x4342)), mult);
  }
}

// Two e2m1 nibbles (bits 0-3 and 16-19 of u) as bf16 fields: value = e2m1 * 2^-126.
__device__ __forceinline__ uint32_t e2m1_pair_bits(uint32_t u) {
  return ((u & 0x00080008u) << 12) | ((u & 0x00070007u) << 6);
}

// 16 e2m1 codes (8 bytes, dim 2i in the low nibble of byte i) with e4m3 scale byte s -> 16 bf16
// times 2^-32.
__device__ __forceinline__ void decode_fp4x16(const uint2 codes, uint32_t s, uint32_t (&out)[8]) {
  // 2^126 (code placement) * scale * 2^-32 = scale * 2^94, at most 448 * 2^94: a normal bf16.
  // The scale's bits placed as for e4m3_pair_bits (value * 2^-120), then * 2^107 * 2^107: exact
  // (the intermediate e4m3 * 2^-13 is normal), branch-free.
  const float sv = __uint_as_float(e4m3_pair_bits(s) << 16);
  const float mf = __fmul_rn(__fmul_rn(sv, 1.6225927682921336e32f), 1.6225927682921336e32f);
  const uint32_t m = __float_as_uint(mf) >> 16;
  const uint32_t mult = m | (m << 16);
  const uint32_t w[2] = {codes.x, codes.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t u = __byte_perm(w[i], 0, h == 0 ? 0x4140 : 0x4342);  // bytes 2h, 2h+1
      const uint32_t even = e2m1_pair_bits(u);      // dims 4q, 4q+2 (low nibbles)
      const uint32_t odd = e2m1_pair_bits(u >> 4);  // dims 4q+1, 4q+3
      const int q = 2 * i + h;
      out[2 * q] = bf16x2_mul(__byte_perm(even, odd, 0x5410), mult);
      out[2 * q + 1] = bf16x2_mul(__byte_perm(even, odd, 0x7632), mult);
    }
  }
}

}  // namespace di::backend::cuda
