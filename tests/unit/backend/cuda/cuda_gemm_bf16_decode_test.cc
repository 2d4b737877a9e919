// The tensor path's decode kernel for FP8 products at 1-8 rows (gemm_bf16_decode.cu): the same
// bits as the bf16 wgmma kernel it stands in for
// (every tile variant of it), for every row count it takes, every variant, N tails and K from 128
// to 8192; every output written. CudaOps picks it for <= 8 rows, so the batch-invariance test of
// cuda_gemm_wgmma_bf16_test.cc (a row alone vs in 1500 rows) runs across the two kernels. Skips
// without an sm_90 device.
#include <cmath>

#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaBf16DecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "wgmma needs an sm_90 device";
  }
};

struct Shape {
  int64_t out, in;
};

TEST_F(CudaBf16DecodeTest, SameBitsAsTheWgmmaKernel) {
  for (const Shape s :
       {Shape{96, 128}, Shape{200, 1280}, Shape{512, 5120}, Shape{1000, 2304}, Shape{40, 8192},
        // The K split's cluster sizes 2 (with a short last slice), 5 and 8, and 8 with two
        // chunks per warp (K = 20,480: only up to 2 rows fit the whole-K kernels' shared memory).
        Shape{5120, 2304}, Shape{72, 10240}, Shape{48, 16384}, Shape{48, 20480}}) {
    const int64_t max_rows = 8;
    RandomWeight w = random_weight(WeightFormat::kFP8, s.out, s.in, 31);
    // Activations over a wide range, so that block sums carry large and small products.
    auto x = random_rows(static_cast<size_t>(max_rows * s.in), 37);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 29) - 14);
    const size_t nx = x.size(), ny = static_cast<size_t>(max_rows * s.out);
    float *dx = nullptr, *y = nullptr;
    uint8_t *wd = nullptr, *ws = nullptr, *wp = nullptr;
    uint16_t* xb = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&xb, nx * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&y, ny * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&wd, w.data.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ws, w.scale.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&wp, static_cast<size_t>(cuda::wgmma_bf16_layout_bytes(s.out, s.in))),
              cudaSuccess);
    (void)cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice);
    (void)cudaMemcpy(wd, w.data.data(), w.data.size(), cudaMemcpyHostToDevice);
    (void)cudaMemcpy(ws, w.scale.data(), w.scale.size(), cudaMemcpyHostToDevice);
    ASSERT_EQ(cuda::wgmma_bf16_permute(wd, s.out, s.in, wp, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::quantize_fp8_bf16(dx, max_rows, s.in, xb, nullptr), cudaSuccess);
    const cuda::DeviceWeight dwp{WeightFormat::kFP8, s.out, s.in, wp, ws};
    std::vector<float> ref(ny), got(ny);
    for (int64_t rows = 1; rows <= max_rows; ++rows) {
      if (!cuda::bf16_decode_applies(rows, dwp)) {
        ASSERT_TRUE(s.in >= 16384 && rows > 2) << rows << " rows, K " << s.in;
        continue;
      }
      const size_t n = static_cast<size_t>(rows * s.out);
      const std::string what =
          std::to_string(rows) + "x" + std::to_string(s.out) + "x" + std::to_string(s.in);
      // The wgmma kernel's decode tile and its largest one: the same bits (its own test).
      for (int v : {3, 0}) {
        (void)cudaMemset(y, 0xff, ny * 4);
        ASSERT_EQ(cuda::block_scaled_gemm_wgmma_bf16(v, xb, rows, dwp, y, nullptr), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(v == 3 ? ref.data() : got.data(), y, n * 4, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        if (v == 0) {
          expect_bitwise(std::vector<float>(got.begin(), got.begin() + n),
                         std::vector<float>(ref.begin(), ref.begin() + n),
                         ("wgmma tiles " + what).c_str());
        }
      }
      size_t nan = 0;
      for (size_t i = 0; i < n; ++i) nan += std::isnan(ref[i]);
      EXPECT_EQ(nan, 0u) << what;
      for (int v = 1; v <= cuda::kBf16DecodeVariants; ++v) {
        (void)cudaMemset(y, 0xff, ny * 4);
        ASSERT_EQ(cuda::block_scaled_gemm_bf16_decode(xb, rows, dwp, y, nullptr, v), cudaSuccess)
            << what;
        ASSERT_EQ(cudaMemcpy(got.data(), y, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        expect_bitwise(
            std::vector<float>(got.begin(), got.begin() + n),
            std::vector<float>(ref.begin(), ref.begin() + n),
            ("decode kernel vs wgmma, " + what + ", variant " + std::to_string(v)).c_str());
      }
    }
    EXPECT_FALSE(cuda::bf16_decode_applies(9, dwp));
    for (void* p : {static_cast<void*>(dx), static_cast<void*>(xb), static_cast<void*>(y),
                    static_cast<void*>(wd), static_cast<void*>(ws), static_cast<void*>(wp)}) {
      (void)cudaFree(p);
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
