// The one summation order every fp32 dot product in DeepInfer uses: eight interleaved lanes
// (lane j takes elements j, j+8, ...; each product rounded, then added), combined as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the tail in order. Fixing it makes results
// independent of batch shape and thread split; GCC vector extensions keep it one 8-wide
// multiply and add per step on any x86 target (no FMA contraction: -ffp-contract=off in ISO mode).
#pragma once

#include <cstdint>
#include <cstring>

namespace di::kernels {

typedef float Vec8f __attribute__((vector_size(32)));
typedef uint16_t Vec8u16 __attribute__((vector_size(16)));
typedef uint32_t Vec8u32 __attribute__((vector_size(32)));

inline float combine_lanes(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

inline Vec8f load8(const float* p) {
  Vec8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float reduce8(Vec8f acc) {
  float lane[8];
  std::memcpy(lane, &acc, sizeof lane);
  return combine_lanes(lane);
}

inline float dot_f32(const float* a, const float* b, int64_t n) {
  Vec8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) acc += load8(a + k) * load8(b + k);
  float s = reduce8(acc);
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

// Eight bf16 values widened to fp32 (exact).
inline Vec8f load8_bf16(const uint16_t* p) {
  Vec8u16 h;
  std::memcpy(&h, p, sizeof h);
  Vec8u32 w = __builtin_convertvector(h, Vec8u32) << 16;
  Vec8f f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

// dot_f32(a, widen(w), n) without materializing the widened row; bitwise the same result.
inline float dot_f32_bf16(const float* a, const uint16_t* w, int64_t n) {
  Vec8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) acc += load8(a + k) * load8_bf16(w + k);
  float s = reduce8(acc);
  for (; k < n; ++k) {
    uint32_t bits = static_cast<uint32_t>(w[k]) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    s += a[k] * v;
  }
  return s;
}

inline float sum_squares_f32(const float* a, int64_t n) {
  return dot_f32(a, a, n);
}

}  // namespace di::kernels
