#include "tensor/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace di {
namespace {

// Plain reference: nearest e4m3 value by exhaustive search over the 254 finite codes, ties to the
// even code, saturating at 448.
float nearest_e4m3_bruteforce(float f) {
  float a = std::fmin(std::fabs(f), 448.0f);
  float best = 0;
  int best_code = 0;
  float best_err = INFINITY;
  for (int c = 0; c < 0x7f; ++c) {
    float v = e4m3_to_float(static_cast<uint8_t>(c));
    float err = std::fabs(v - a);
    if (err < best_err || (err == best_err && (c % 2 == 0))) {
      best_err = err;
      best = v;
      best_code = c;
    }
  }
  (void)best_code;
  return std::signbit(f) ? -best : best;
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
}

TEST(Numeric, E4m3TableMatchesFormat) {
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    float v = e4m3_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(float_to_e4m3(v), c == 0x80 ? 0x80 : c) << c;
  }
}

TEST(Numeric, E4m3EncodeMatchesBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp_dist(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    float f = std::ldexp(1.0f, 0) * std::exp2(exp_dist(rng)) * ((i & 1) ? -1.0f : 1.0f);
    ASSERT_EQ(round_e4m3(f), nearest_e4m3_bruteforce(f)) << f;
  }
  // exact midpoints between codes round to the even code
  float mid = (e4m3_to_float(0x38) + e4m3_to_float(0x39)) / 2;  // between 1 and 1.125
  EXPECT_EQ(round_e4m3(mid), 1.0f);
  EXPECT_EQ(round_e4m3(1000.0f), 448.0f);
  EXPECT_EQ(round_e4m3(-1000.0f), -448.0f);
}

TEST(Numeric, E2m1RoundsToNearestEvenCode) {
  EXPECT_EQ(round_e2m1(0.25f), 0.0f);
  EXPECT_EQ(round_e2m1(0.75f), 1.0f);
  EXPECT_EQ(round_e2m1(1.25f), 1.0f);
  EXPECT_EQ(round_e2m1(1.75f), 2.0f);
  EXPECT_EQ(round_e2m1(2.5f), 2.0f);
  EXPECT_EQ(round_e2m1(3.5f), 4.0f);
  EXPECT_EQ(round_e2m1(5.0f), 4.0f);
  EXPECT_EQ(round_e2m1(5.1f), 6.0f);
  EXPECT_EQ(round_e2m1(-2.9f), -3.0f);
  for (int c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0
    EXPECT_EQ(float_to_e2m1(e2m1_to_float(static_cast<uint8_t>(c))), c);
  }
}

TEST(Numeric, Pow2CeilScale) {
  EXPECT_EQ(pow2_ceil_scale(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil_scale(1.5f), 2.0f);
  EXPECT_EQ(pow2_ceil_scale(0.3f), 0.5f);
  EXPECT_EQ(pow2_ceil_scale(std::ldexp(1.0f, -20)), std::ldexp(1.0f, -20));
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(130), 8.0f);
}

}  // namespace
}  // namespace di
