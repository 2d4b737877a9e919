// The one summation order every fp32 dot product in DeepInfer uses: eight interleaved lanes
// (lane j takes elements j, j+8, ...), combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the
// tail. Fixing it makes results independent of batch shape and thread split, and it vectorizes
// without -ffast-math.
#pragma once

#include <cstdint>

namespace di::kernels {

inline float combine_lanes(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

inline float dot_f32(const float* a, const float* b, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += a[k + j] * b[k + j];
  }
  float s = combine_lanes(lane);
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

inline float sum_squares_f32(const float* a, int64_t n) { return dot_f32(a, a, n); }

}  // namespace di::kernels
