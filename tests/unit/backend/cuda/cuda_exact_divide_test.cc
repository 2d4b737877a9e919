// The sparse attention epilogue's division (attn::ExactDivider through the exact_divide_check
// hook) against __fdiv_rn, bitwise: random numerators and denominators over and beyond the fast
// path's range, the values attention produces, and the hard cases of correct rounding. Skips
// without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {
namespace {

float from_parts(uint32_t sign, int exp, uint32_t mantissa) {
  return std::bit_cast<float>((sign << 31) | (static_cast<uint32_t>(exp + 127) << 23) |
                              (mantissa & 0x7fffffu));
}

struct Result {
  int64_t mismatches = 0, fast = 0;
  std::string first;
};

// Runs the hook on (x, den) pairs and compares the two results bit for bit.
Result run(const std::vector<float>& x, const std::vector<float>& den) {
  Result r;
  const size_t n = x.size();
  float *dx = nullptr, *dd = nullptr, *df = nullptr, *di = nullptr;
  uint8_t* dr = nullptr;
  EXPECT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dd, n * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&df, n * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&di, n * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dr, n), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dd, den.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(exact_divide_check(dx, dd, static_cast<int64_t>(n), df, di, dr, nullptr), cudaSuccess);
  std::vector<uint32_t> f(n), i(n);
  std::vector<uint8_t> in(n);
  EXPECT_EQ(cudaMemcpy(f.data(), df, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(i.data(), di, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(in.data(), dr, n, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(dd), static_cast<void*>(df),
                  static_cast<void*>(di), static_cast<void*>(dr)}) {
    cudaFree(p);
  }
  for (size_t k = 0; k < n; ++k) {
    r.fast += in[k];
    if (f[k] != i[k]) {
      if (r.mismatches++ == 0) {
        char s[160];
        std::snprintf(s, sizeof s, "%a / %a: fast %08x, __fdiv_rn %08x", x[k], den[k], f[k], i[k]);
        r.first = s;
      }
    }
  }
  return r;
}

class ExactDivideTest : public ::testing::Test {
 public:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(ExactDivideTest, RandomPairsOverAndBeyondTheRangeMatchIeeeDivision) {
  std::mt19937_64 rng(17);
  std::vector<float> x, den;
  const size_t n = size_t{1} << 23;
  for (size_t k = 0; k < n; ++k) {
    const uint64_t r = rng();
    den.push_back(from_parts(0, static_cast<int>(r % 64) - 2, static_cast<uint32_t>(r >> 8)));
    x.push_back(from_parts(static_cast<uint32_t>(r >> 63), static_cast<int>((r >> 32) % 190) - 75,
                           static_cast<uint32_t>(rng())));
  }
  const Result r = run(x, den);
  EXPECT_EQ(r.mismatches, 0) << r.first;
  EXPECT_GT(r.fast, static_cast<int64_t>(n / 2));  // most pairs take the fast path
}

TEST_F(ExactDivideTest, AttentionLikeValuesAllTakeTheFastPathAndMatch) {
  // den = l + 2^(sink - max) in [1, 4096]; x = acc * 2^32 = sum p v with |v| up to 2^8.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(1.0f, 4096.0f), uv(-256.0f, 256.0f);
  std::vector<float> x, den;
  for (int k = 0; k < (1 << 22); ++k) {
    const float d = ud(rng);
    den.push_back(d);
    x.push_back(std::nextafter(d * uv(rng) / 64.0f, 0.0f));
  }
  const Result r = run(x, den);
  EXPECT_EQ(r.mismatches, 0) << r.first;
  EXPECT_EQ(r.fast, static_cast<int64_t>(x.size()));
}

TEST_F(ExactDivideTest, HardCasesMatchIeeeDivision) {
  // Denominators at binade edges and small odd values; numerators at mantissa extremes, exact
  // multiples, near-halfway quotients, the range bounds, zeros, subnormals, infinities, NaN.
  std::vector<float> dens = {1.0f,
                             2.0f,
                             3.0f,
                             5.0f,
                             7.0f,
                             0x1p60f,
                             0x1.fffffep59f,
                             std::nextafter(1.0f, 2.0f),
                             std::nextafter(2.0f, 1.0f),
                             1.5f,
                             1.25f,
                             1023.0f,
                             4097.0f,
                             0x1.000002p+10f,
                             0.999f,
                             0x1.000002p60f};
  std::vector<float> nums = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             0x1p-60f,
                             0x1.fffffep-61f,
                             0x1p100f,
                             0x1.000002p100f,
                             0x1.fffffep99f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             0x1p-140f,
                             0x1p-126f};
  std::mt19937 rng(9);
  for (int e = -60; e <= 100; e += 7) {
    for (uint32_t m : {0u, 1u, 0x7fffffu, 0x400000u, 0x3fffffu, 0x555555u, 0x2aaaaau}) {
      nums.push_back(from_parts(0, e, m));
      nums.push_back(from_parts(1, e, m));
    }
  }
  std::vector<float> x, den;
  for (float d : dens) {
    for (float v : nums) {
      x.push_back(v);
      den.push_back(d);
    }
    // Exact quotients and their neighbours: x = q * d for q with few mantissa bits.
    for (int k = 0; k < 4096; ++k) {
      const float q = from_parts(k & 1, static_cast<int>(rng() % 40) - 20, (rng() & 0xff) << 15);
      const float p = q * d;
      for (float v : {p, std::nextafter(p, 0.0f), std::nextafter(p, 2 * p)}) {
        x.push_back(v);
        den.push_back(d);
      }
    }
  }
  const Result r = run(x, den);
  EXPECT_EQ(r.mismatches, 0) << r.first;
}

}  // namespace
}  // namespace di::backend::cuda
