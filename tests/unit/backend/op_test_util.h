// Helpers for op tests: random data, plain double-precision references, tolerant comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/numeric.h"

namespace di::testing {

inline std::vector<float> random_vector(size_t n,
                                        uint32_t seed,
                                        float scale = 1.0f,
                                        bool bf16 = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16 ? round_bf16(d(rng)) : d(rng);
  return v;
}

inline std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// |a - b| <= atol + rtol * |b| everywhere, with the worst element reported.
inline void expect_close(const std::vector<float>& a,
                         const std::vector<double>& b,
                         double rtol,
                         double atol,
                         const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(a[i])) << what << ": element " << i << " not written or NaN";
    double excess = std::fabs(a[i] - b[i]) - (atol + rtol * std::fabs(b[i]));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": worst element " << worst << ": got " << a[worst]
                               << ", reference " << b[worst];
}

// The e4m3 value nearest to v by exhaustive search (ties to the even code), saturating.
inline double nearest_e4m3(double v) {
  double a = std::min(std::fabs(v), 448.0), best = 0, err = INFINITY;
  for (int c = 0; c < 0x7f; ++c) {
    double x = e4m3_to_float(static_cast<uint8_t>(c)), e = std::fabs(x - a);
    if (e < err || (e == err && c % 2 == 0)) {
      err = e;
      best = x;
    }
  }
  return v < 0 ? -best : best;
}

inline double nearest_e2m1(double v) {
  static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  double a = std::min(std::fabs(v), 6.0), best = 0, err = INFINITY;
  for (int c = 0; c < 8; ++c) {
    double e = std::fabs(grid[c] - a);
    if (e < err || (e == err && c % 2 == 0)) {
      err = e;
      best = grid[c];
    }
  }
  return v < 0 ? -best : best;
}

// 2^ceil(log2(x)) in double.
inline double pow2_ceil(double x) {
  return std::exp2(std::ceil(std::log2(x)));
}

}  // namespace di::testing
