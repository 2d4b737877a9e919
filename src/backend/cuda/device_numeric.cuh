// Device twins of tensor/numeric.h and kernels/ref/dot.h: the same roundings, bit for bit, written
// with explicit round-to-nearest intrinsics so that no compiler contraction can change them.
// Transcendentals (exp, log1p, sin, cos) go through double precision and round once to fp32: that
// is the correctly rounded result, which glibc's fp32 functions also return except in rare
// near-midpoint cases (see docs/notes/cuda-kernels.md).
#pragma once

#include <cstdint>

namespace di::backend::cuda {

__device__ __forceinline__ float round_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
  u += 0x7fffu + ((u >> 16) & 1u);
  return __uint_as_float(u & 0xffff0000u);
}

__device__ __forceinline__ float e8m0_to_float(uint8_t b) {
  if (b == 0) return __uint_as_float(0x00400000u);
  if (b == 255) return __uint_as_float(0x7fc00000u);
  return __uint_as_float(static_cast<uint32_t>(b) << 23);
}

__device__ __forceinline__ float e4m3_to_float(uint8_t b) {
  const int exp = (b >> 3) & 0xf, man = b & 7;
  float v;
  if (exp == 0xf && man == 7) {
    v = __uint_as_float(0x7fc00000u);
  } else if (exp == 0) {
    v = __fmul_rn(static_cast<float>(man), 0.001953125f);  // man * 2^-9, exact
  } else {
    v = __uint_as_float(static_cast<uint32_t>(exp - 7 + 127) << 23 | static_cast<uint32_t>(man)
                                                                         << 20);
  }
  return (b & 0x80) ? -v : v;
}

// The value of f after a saturating round trip through e4m3 (float_to_e4m3 then decode).
__device__ __forceinline__ float round_e4m3(float f) {
  if (f != f) return f;
  const float a = fabsf(f);
  if (a >= 448.0f) return copysignf(448.0f, f);
  int e = static_cast<int>((__float_as_uint(a) >> 23) & 0xff) - 127;
  if (e < -6) e = -6;
  const float step = __uint_as_float(static_cast<uint32_t>(e - 3 + 127) << 23);
  float v = __fmul_rn(rintf(__fdiv_rn(a, step)), step);
  if (v >= 448.0f) v = 448.0f;
  return copysignf(v, f);
}

// Built from the code's bits: a table would be a local-memory array on the device.
__device__ __forceinline__ float e2m1_to_float(uint32_t code) {
  const uint32_t c = code & 7;
  const float m = c == 0   ? 0.0f
                  : c == 1 ? 0.5f
                           : __uint_as_float((126 + (c >> 1)) << 23 | (c & 1) << 22);
  return (code & 8) ? -m : m;
}

__device__ __forceinline__ float round_e2m1(float f) {
  const float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const bool kTieUp[7] = {false, true, false, true, false, true, false};
  const float a = fabsf(f);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i) {
    if (a > kMid[i] || (a == kMid[i] && kTieUp[i])) code = static_cast<uint8_t>(i + 1);
  }
  return e2m1_to_float(static_cast<uint8_t>(code | (signbit(f) ? 8 : 0)));
}

__device__ __forceinline__ float pow2_ceil_scale(float x) {
  const uint32_t bits = __float_as_uint(x);
  const int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff);
  const int32_t log2_ceil = exp - 127 + ((bits & 0x7fffffu) != 0 ? 1 : 0);
  return __uint_as_float(static_cast<uint32_t>(log2_ceil + 127) << 23);
}

__device__ __forceinline__ float exp_f32(float x) {
  return static_cast<float>(exp(static_cast<double>(x)));
}

__device__ __forceinline__ float log1p_f32(float x) {
  return static_cast<float>(log1p(static_cast<double>(x)));
}

// 1 / (1 + exp(-x)), each step rounded as the CPU's fp32 expression rounds it.
__device__ __forceinline__ float sigmoid_f32(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-x)));
}

// kernels::dot_f32 for one thread: eight interleaved chains, the fixed combine, then the tail.
// `stride` lets a caller read a strided operand (1 for contiguous rows).
__device__ __forceinline__ float dot8(const float* a, const float* b, int64_t n) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(l[j], __fmul_rn(a[k + j], b[k + j]));
  }
  float s = __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                      __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
  for (; k < n; ++k) s = __fadd_rn(s, __fmul_rn(a[k], b[k]));
  return s;
}

// prmt.b32 in its default mode, where a selector nibble with bit 3 set gives the selected byte's
// sign bit in all eight bits (__byte_perm is documented with three-bit selectors only).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

}  // namespace di::backend::cuda
