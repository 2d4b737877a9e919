// Scalar number formats of the V4.1 checkpoint and of its fake quantization (spec §1.9):
// bf16, fp8 e4m3 (saturating, round-to-nearest-even), ue8m0 power-of-two scales, fp4 e2m1.
// Every conversion here is bit-exact with the reference's torch / CUDA conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace di {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 stored as its upper 16 bits.
inline float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
// The value a float takes after a round trip through bf16.
inline float round_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
}

// ue8m0: one byte b meaning 2^(b-127).
inline float e8m0_to_float(uint8_t b) {
  if (b == 0) return bits_float(0x00400000u);  // 2^-127 is subnormal in fp32
  if (b == 255) return NAN;
  return bits_float(static_cast<uint32_t>(b) << 23);
}

// fp8 e4m3fn decode table (256 entries, NaN for 0x7f/0xff).
const float* e4m3_table();
inline float e4m3_to_float(uint8_t b) {
  return e4m3_table()[b];
}
// fp32 -> e4m3fn code, round to nearest even, saturating at +-448 (CUDA satfinite).
uint8_t float_to_e4m3(float f);
// The value a float takes after a saturating round trip through e4m3.
inline float round_e4m3(float f) {
  return e4m3_to_float(float_to_e4m3(f));
}

// fp4 e2m1: code bit 3 is the sign; magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
inline float e2m1_to_float(uint8_t code) {
  static constexpr float kMag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  float m = kMag[code & 7];
  return (code & 8) ? -m : m;
}
// fp32 in [-6, 6] -> e2m1 code, round to nearest even code at ties.
inline uint8_t float_to_e2m1(float f) {
  static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  static constexpr bool kTieUp[7] = {false, true, false, true, false, true, false};
  float a = std::fabs(f);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i) {
    if (a > kMid[i] || (a == kMid[i] && kTieUp[i])) code = static_cast<uint8_t>(i + 1);
  }
  return static_cast<uint8_t>(code | (std::signbit(f) ? 8 : 0));
}
inline float round_e2m1(float f) {
  return e2m1_to_float(float_to_e2m1(f));
}

// 2^ceil(log2(x)) computed from the exponent and mantissa bits, as the reference's
// fast_round_scale does (x is amax * fp32(1/max) and always positive and normal here).
inline float pow2_ceil_scale(float x) {
  uint32_t bits = float_bits(x);
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff);
  uint32_t man = bits & 0x7fffffu;
  int32_t log2_ceil = exp - 127 + (man != 0 ? 1 : 0);
  return bits_float(static_cast<uint32_t>(log2_ceil + 127) << 23);
}

inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp4Max = 6.0f;

}  // namespace di
