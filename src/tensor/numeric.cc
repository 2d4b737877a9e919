#include "tensor/numeric.h"

#include <array>

namespace di {

namespace {
std::array<float, 256> build_e4m3_table() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    int sign = (b >> 7) & 1;
    int exp = (b >> 3) & 0xf;
    int man = b & 7;
    float v;
    if (exp == 0xf && man == 7) {
      v = NAN;
    } else if (exp == 0) {
      v = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
    } else {
      v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
    t[b] = sign ? -v : v;
  }
  return t;
}
}  // namespace

const float* e4m3_table() {
  static const std::array<float, 256> table = build_e4m3_table();
  return table.data();
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= kFp8Max) return static_cast<uint8_t>(sign | 0x7e);  // saturate to 448
  // Smallest subnormal step is 2^-9; normals have 3 mantissa bits.
  int exp;
  std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  int e = exp - 1;      // a in [2^e, 2^(e+1))
  if (e < -6) e = -6;   // subnormal range shares the 2^-6 exponent
  float step = std::ldexp(1.0f, e - 3);
  float q = a / step;           // exact: power-of-two division
  float r = std::nearbyint(q);  // default rounding mode: nearest even
  float v = r * step;
  // Re-encode v (now exactly representable, possibly rounded up into the next binade).
  if (v >= kFp8Max) return static_cast<uint8_t>(sign | 0x7e);
  if (v == 0.0f) return sign;
  int vexp;
  float m = std::frexp(v, &vexp);
  int ve = vexp - 1;
  if (ve < -6) {  // subnormal
    int man = static_cast<int>(v / std::ldexp(1.0f, -9));
    return static_cast<uint8_t>(sign | man);
  }
  int man = static_cast<int>((m * 2.0f - 1.0f) * 8.0f);
  return static_cast<uint8_t>(sign | ((ve + 7) << 3) | man);
}

}  // namespace di
