// The fp32 <-> bf16-bits conversions around attention and the BF16 tensor-core products
// (kv_cache_codec.cu: eight values a thread on 16-byte aligned buffers, one otherwise): the CPU's
// round_bf16 bits for every value and every length (tails of the wide form), aligned or not,
// and the widening exact. Skips without a CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cuda/kv_cache_codec.h"
#include "cuda_test_util.h"
#include "tensor/numeric.h"

namespace di::backend::testing {
namespace {

uint16_t host_bits(float v) {
  const float r = round_bf16(v);
  uint32_t u = 0;
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(CudaBf16Convert, BothDirectionsAtEveryLengthAndAlignment) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kMax = 8 * 1000 + 13;
  std::vector<float> x(static_cast<size_t>(kMax + 8));
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u = bits(rng);
    if ((u & 0x7f800000u) == 0x7f800000u) u &= 0xbfffffffu;  // no NaN or inf from random bits
    std::memcpy(&x[i], &u, 4);
  }
  // Ties, both rounding directions, subnormals, signed zero and infinities.
  const float special[] = {1.00390625f,
                           1.01171875f,
                           -2.0078125f,
                           1e-40f,
                           -1e-45f,
                           -0.0f,
                           0.0f,
                           3.40282e38f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < std::size(special); ++i) x[i * 7] = special[i];
  float *dx = nullptr, *dy = nullptr;
  uint16_t* db = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{4096}, kMax}) {
    for (int64_t offset : {0, 1}) {  // 1: neither pointer 16-byte aligned (the scalar form)
      const std::string what = std::to_string(n) + " values, offset " + std::to_string(offset);
      ASSERT_EQ(cudaMemset(db, 0xff, x.size() * 2), cudaSuccess);
      ASSERT_EQ(cuda::f32_to_bf16_bits(dx + offset, n, db + offset, nullptr), cudaSuccess);
      std::vector<uint16_t> got(static_cast<size_t>(n + 2));
      ASSERT_EQ(cudaMemcpy(got.data(), db + offset, got.size() * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
      size_t bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[i] != host_bits(x[i + offset]);
      EXPECT_EQ(bad, 0u) << "to bf16, " << what;
      EXPECT_EQ(got[n], 0xffffu) << "wrote past the end, " << what;
      ASSERT_EQ(cudaMemset(dy, 0xff, x.size() * 4), cudaSuccess);
      ASSERT_EQ(cuda::bf16_bits_to_f32(db + offset, n, dy + offset, nullptr), cudaSuccess);
      std::vector<uint32_t> wide(static_cast<size_t>(n + 1));
      ASSERT_EQ(cudaMemcpy(wide.data(), dy + offset, wide.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += wide[i] != static_cast<uint32_t>(got[i]) << 16;
      EXPECT_EQ(bad, 0u) << "from bf16, " << what;
      EXPECT_EQ(wide[n], 0xffffffffu) << "wrote past the end, " << what;
    }
  }
  EXPECT_EQ(cuda::f32_to_bf16_bits(dx, -1, db, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::f32_to_bf16_bits(dx, 0, db, nullptr), cudaSuccess);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(dy), static_cast<void*>(db)}) {
    (void)cudaFree(p);
  }
}

}  // namespace
}  // namespace di::backend::testing
