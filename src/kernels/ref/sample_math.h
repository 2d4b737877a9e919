// The arithmetic of token sampling that the host sampler and every backend's sampling op compute
// bitwise alike: a counter-based generator keyed by (seed, stream, position, token), a log and an
// exp made only of IEEE-exact operations (+, -, *, / and exact bit manipulation; compiled without
// FMA contraction: -ffp-contract=off on the host, -fmad=false on the device), fixed-point
// probability weights whose sums are exact integers (so any summation order gives the same sum),
// and an order-preserving key for float logits. docs/notes/cuda-kernels.md ("Sampling on the
// device") defines the draw built from them.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DI_SAMPLE_HD __host__ __device__ __forceinline__
#else
#define DI_SAMPLE_HD inline
#endif

namespace di::kernels::sample {

DI_SAMPLE_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The row's generator key: the engine's counter_uniform(seed, stream, position) bits.
DI_SAMPLE_HD uint64_t row_key(uint64_t seed, uint64_t stream, uint64_t position) {
  return mix64(mix64(mix64(seed) ^ stream) ^ position);
}

DI_SAMPLE_HD double bits_to_double(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
#endif
}

DI_SAMPLE_HD uint64_t double_to_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
#endif
}

// A uniform double in (0, 1), never 0 or 1 (53 random bits, centred): token `token`'s draw.
DI_SAMPLE_HD double token_uniform(uint64_t key, uint32_t token) {
  return (static_cast<double>(mix64(key ^ token) >> 11) + 0.5) * 0x1.0p-53;
}

// ln(x) for a positive normal double: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
// ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its odd series to s^23 (error far
// under 1e-15; what matters is that every operation is exactly rounded, so all builds agree).
DI_SAMPLE_HD double portable_log(double x) {
  const uint64_t b = double_to_bits(x);
  int e = static_cast<int>((b >> 52) & 0x7ff) - 1023;
  double m = bits_to_double((b & 0xfffffffffffffull) | (1023ull << 52));
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    e = e + 1;
  }
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double p = 2.0 / 23.0;
  p = p * s2 + 2.0 / 21.0;
  p = p * s2 + 2.0 / 19.0;
  p = p * s2 + 2.0 / 17.0;
  p = p * s2 + 2.0 / 15.0;
  p = p * s2 + 2.0 / 13.0;
  p = p * s2 + 2.0 / 11.0;
  p = p * s2 + 2.0 / 9.0;
  p = p * s2 + 2.0 / 7.0;
  p = p * s2 + 2.0 / 5.0;
  p = p * s2 + 2.0 / 3.0;
  const double ln2_hi = 0.693147180369123816490, ln2_lo = 1.90821492927058770002e-10;
  const double de = static_cast<double>(e);
  return de * ln2_hi + ((2.0 * s + s * s2 * p) + de * ln2_lo);
}

// The Gumbel noise of token `token`: -ln(-ln(u)), in about (-3.62, 37.5).
DI_SAMPLE_HD double gumbel(uint64_t key, uint32_t token) {
  return -portable_log(-portable_log(token_uniform(key, token)));
}

// exp(x) for x in [-24, 0]: x = n ln2 + r, |r| <= ln2 / 2, Taylor to r^13, times 2^n (exact).
DI_SAMPLE_HD double portable_exp_neg(double x) {
  const double ln2_hi = 0.693147180369123816490, ln2_lo = 1.90821492927058770002e-10;
  // n = round(x / ln2) for x <= 0: the truncation of the non-negative -x / ln2 + 1/2.
  const int n = -static_cast<int>(x * -1.4426950408889634 + 0.5);
  const double fn = static_cast<double>(n);
  const double r = (x - fn * ln2_hi) - fn * ln2_lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * bits_to_double(static_cast<uint64_t>(1023 + n) << 52);
}

// The fixed-point weight of a token whose scaled logit is d = (logit - max) / temperature <= 0:
// floor(exp(d) * 2^32) (the top token weighs exactly 2^32; below d = -23 it is 0). A row's
// weights sum to under 2^49, exactly, in any order.
inline constexpr double kWeightOne = 4294967296.0;
DI_SAMPLE_HD uint64_t weight(double d) {
  if (!(d >= -23.0)) return 0;
  return static_cast<uint64_t>(portable_exp_neg(d) * kWeightOne);
}

// The scaled logit of a finite logit v in a row whose largest logit is mx.
DI_SAMPLE_HD double scaled(float v, float mx, float temperature) {
  return (static_cast<double>(v) - static_cast<double>(mx)) / static_cast<double>(temperature);
}

// A token whose scaled logit is under this cannot win the race: its score is under
// -45 + 37.5 < -3.62, the least score the top token (d = 0) can have. Skipping it saves its logs.
inline constexpr double kRaceSkip = -45.0;

// A monotone unsigned key of a float (-0 and +0 equal; no NaN): a > b <=> key(a) > key(b).
DI_SAMPLE_HD uint32_t order_key(float v) {
#if defined(__CUDA_ARCH__)
  uint32_t b = __float_as_uint(v);
#else
  uint32_t b;
  memcpy(&b, &v, sizeof b);
#endif
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Bits of an allowed-token mask: bit t % 32 of word t / 32 set = token t allowed.
DI_SAMPLE_HD int64_t mask_words(int64_t vocab) {
  return (vocab + 31) / 32;
}

}  // namespace di::kernels::sample
