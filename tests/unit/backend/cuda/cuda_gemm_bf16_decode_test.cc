// The tensor path's decode kernel for FP8 products at 1-8 rows (gemm_bf16_decode.cu): the same
// bits as the bf16 wgmma kernel it stands in for
// (every tile variant of it), for every row count it takes, every variant, N tails and K from 128
// to 8192; every output written. CudaOps picks it for <= 8 rows, so the batch-invariance test of
// cuda_gemm_wgmma_bf16_test.cc (a row alone vs in 1500 rows) runs across the two kernels. Skips
// without an sm_90 device.
#include <cmath>
#include <tuple>
#include <utility>

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
       {Shape{96, 128}, Shape{200, 1280}, Shape{136, 640}, Shape{512, 5120}, Shape{1000, 2304},
        Shape{40, 8192},
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
      // The wgmma kernel's decode tile against its largest one and the other few-row tiles
      // (ring depths, four blocks in flight; K = 128 and 640 give one and five stages, fewer
      // than a ring): the same bits.
      for (int v : {3, 0, 5, 6, 7, 8, 9, 10}) {
        (void)cudaMemset(y, 0xff, ny * 4);
        ASSERT_EQ(cuda::block_scaled_gemm_wgmma_bf16(v, xb, rows, dwp, y, nullptr), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(v == 3 ? ref.data() : got.data(), y, n * 4, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        if (v != 3) {
          expect_bitwise(std::vector<float>(got.begin(), got.begin() + n),
                         std::vector<float>(ref.begin(), ref.begin() + n),
                         ("wgmma tiles " + what + ", variant " + std::to_string(v)).c_str());
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

// Two weights of one K in one launch (CudaOps::linear_pair): each output's bits are those of
// its weight alone, for every variant, row count and split of the tiles (N tails included).
TEST_F(CudaBf16DecodeTest, PairLaunchEqualsSingleProducts) {
  const int64_t K = 5120, max_rows = 8;
  for (const auto& [n0, n1] : {std::pair<int64_t, int64_t>{1280, 512}, {2304, 2304}, {200, 40}}) {
    RandomWeight a = random_weight(WeightFormat::kFP8, n0, K, 41);
    RandomWeight b = random_weight(WeightFormat::kFP8, n1, K, 43);
    auto x = random_rows(static_cast<size_t>(max_rows * K), 47);
    float *dx = nullptr, *y0 = nullptr, *y1 = nullptr, *r0 = nullptr, *r1 = nullptr;
    uint16_t* xb = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&xb, x.size() * 2), cudaSuccess);
    for (float** p : {&y0, &r0}) ASSERT_EQ(cudaMalloc(p, max_rows * n0 * 4), cudaSuccess);
    for (float** p : {&y1, &r1}) ASSERT_EQ(cudaMalloc(p, max_rows * n1 * 4), cudaSuccess);
    (void)cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    ASSERT_EQ(cuda::quantize_fp8_bf16(dx, max_rows, K, xb, nullptr), cudaSuccess);
    std::vector<void*> owned = {dx, xb, y0, y1, r0, r1};
    auto upload = [&](const RandomWeight& w, int64_t n) {
      uint8_t *wd = nullptr, *ws = nullptr, *wp = nullptr;
      EXPECT_EQ(cudaMalloc(&wd, w.data.size()), cudaSuccess);
      EXPECT_EQ(cudaMalloc(&ws, w.scale.size()), cudaSuccess);
      EXPECT_EQ(cudaMalloc(&wp, static_cast<size_t>(cuda::wgmma_bf16_layout_bytes(n, K))),
                cudaSuccess);
      (void)cudaMemcpy(wd, w.data.data(), w.data.size(), cudaMemcpyHostToDevice);
      (void)cudaMemcpy(ws, w.scale.data(), w.scale.size(), cudaMemcpyHostToDevice);
      EXPECT_EQ(cuda::wgmma_bf16_permute(wd, n, K, wp, nullptr), cudaSuccess);
      owned.insert(owned.end(), {wd, ws, wp});
      return cuda::DeviceWeight{WeightFormat::kFP8, n, K, wp, ws};
    };
    const cuda::DeviceWeight w0 = upload(a, n0), w1 = upload(b, n1);
    for (int64_t rows = 1; rows <= max_rows; ++rows) {
      for (int v = 0; v <= cuda::kBf16DecodeVariants; ++v) {
        const std::string what = std::to_string(n0) + "+" + std::to_string(n1) + ", " +
                                 std::to_string(rows) + " rows, variant " + std::to_string(v);
        for (float* p : {y0, r0}) (void)cudaMemset(p, 0xff, max_rows * n0 * 4);
        for (float* p : {y1, r1}) (void)cudaMemset(p, 0xff, max_rows * n1 * 4);
        ASSERT_EQ(cuda::block_scaled_gemm_bf16_decode(xb, rows, w0, r0, nullptr, 1), cudaSuccess);
        ASSERT_EQ(cuda::block_scaled_gemm_bf16_decode(xb, rows, w1, r1, nullptr, 1), cudaSuccess);
        ASSERT_EQ(cuda::block_scaled_gemm_bf16_decode_pair(xb, rows, w0, y0, w1, y1, nullptr, v),
                  cudaSuccess)
            << what;
        for (const auto& [got, ref, n] : {std::tuple{y0, r0, n0}, std::tuple{y1, r1, n1}}) {
          std::vector<float> g(static_cast<size_t>(rows * n)), r(g.size());
          ASSERT_EQ(cudaMemcpy(g.data(), got, g.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
          expect_bitwise(g, r, ("pair launch " + what).c_str());
        }
      }
    }
    // Different K: refused.
    const cuda::DeviceWeight other{WeightFormat::kFP8, n1, K / 2, w1.data, w1.scale};
    EXPECT_NE(cuda::block_scaled_gemm_bf16_decode_pair(xb, 1, w0, y0, other, y1, nullptr),
              cudaSuccess);
    for (void* p : owned) (void)cudaFree(p);
  }
}

}  // namespace
}  // namespace di::backend::testing
