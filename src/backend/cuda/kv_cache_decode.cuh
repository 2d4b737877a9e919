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

// Bytes k and k + 1 of w (k even), each an e4m3 code, as the two bf16 fields of a word:
// value = e4m3 * 2^-120, subnormal codes included (they land on bf16 subnormals with the same
// scaling). The prmt sign-extends each byte to 16 bits, so after the shift by 4 the sign is in
// bit 15 and the magnitude in bits 4-10; the mask clears the copies of the sign in between.
// Three integer instructions a pair (a shift-and-mask per field took five).
template <int k>
__device__ __forceinline__ uint32_t e4m3_pair_bits(uint32_t w) {
  constexpr uint32_t sel = k | (k + 8) << 4 | (k + 1) << 8 | (k + 9) << 12;
  return (prmt(w, 0, sel) << 4) & 0x87f087f0u;
}

// 16 e4m3 codes (one 16-byte load) with ue8m0 scale byte e -> 16 bf16 (8 words) times 2^-32.
__device__ __forceinline__ void decode_fp8x16(const uint4 codes, uint32_t e, uint32_t (&out)[8]) {
  // 2^120 (code placement) * 2^(e-127) (scale) * 2^-32 (shift) = 2^(e-39): bf16 exponent e+88.
  const uint32_t m = min(e + 88u, 255u) << 7;
  const uint32_t mult = m | (m << 16);
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16x2_mul(e4m3_pair_bits<0>(w[i]), mult);
    out[2 * i + 1] = bf16x2_mul(e4m3_pair_bits<2>(w[i]), mult);
  }
}

// 16 e2m1 codes (8 bytes, dim 2i in the low nibble of byte i) with e4m3 scale byte s -> 16 bf16
// times 2^-32.
__device__ __forceinline__ void decode_fp4x16(const uint2 codes, uint32_t s, uint32_t (&out)[8]) {
  // 2^126 (code placement) * scale * 2^-32 = scale * 2^94, at most 448 * 2^94: a normal bf16.
  // The scale's bits placed as for e4m3_pair_bits (value * 2^-120), then * 2^107 * 2^107: exact
  // (the intermediate e4m3 * 2^-13 is normal), branch-free.
  const float sv = __uint_as_float(e4m3_pair_bits<0>(s) << 16);
  const float mf = __fmul_rn(__fmul_rn(sv, 1.6225927682921336e32f), 1.6225927682921336e32f);
  const uint32_t m = __float_as_uint(mf) >> 16;
  const uint32_t mult = m | (m << 16);
  const uint32_t w[2] = {codes.x, codes.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    // The low and the high nibble of each byte, each in the high half of its byte, so that the
    // code's sign is the byte's top bit.
    const uint32_t lo = (w[i] << 4) & 0xf0f0f0f0u, hi = w[i] & 0xf0f0f0f0u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Byte k's nibbles n, sign-extended into the two 16-bit fields (n << 4 under copies of its
      // sign); shifted by 2, a field holds n & 7 in bits 6-8 and a copy of the sign in bit 15:
      // the bf16 field (n & 8) << 12 | (n & 7) << 6 (value = e2m1 * 2^-126) once the rest is
      // masked. Three integer instructions a pair (four before session 21, with the same words:
      // each pair depends on its own code byte only, and cuda_sparse_attention_fp8_test decodes
      // every byte value at every position against the host decoder).
      const uint32_t g = prmt(lo, hi, k | (k + 8) << 4 | (k + 4) << 8 | (k + 12) << 12);
      out[4 * i + k] = bf16x2_mul((g << 2) & 0x81c081c0u, mult);
    }
  }
}

}  // namespace di::backend::cuda
