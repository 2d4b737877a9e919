// The sm_90a wgmma FP8 GEMMs (gemm_wgmma.cu, gemm_fp8.cu), which CudaGemm::kFp8 uses for every M
// when K % 128 == 0: within tolerance of the CPU backend (its error is printed), every tile variant
// the same bits, every output written, and a row's bits independent of its batch through CudaOps.
// Skips without an sm_90 device.
#include <cstdio>

#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaWgmmaGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "wgmma needs an sm_90 device";
    CudaOptions o;
    o.arena_bytes = size_t{1} << 30;
    o.gemm = CudaGemm::kFp8;
    auto ops = CudaOps::create(pool_, o);
    ASSERT_TRUE(ops.has_value()) << ops.status().to_string();
    gpu_ = std::move(ops).value();
  }
  void TearDown() override {
    if (gpu_) {
      EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    }
  }
  ThreadPool pool_{2};
  CpuOps cpu_{pool_};
  std::unique_ptr<CudaOps> gpu_;
};

struct Shape {
  int64_t rows, out, in;
};

// Shapes reach every tile the dispatch picks (<= 64 rows, <= 256, <= 1024, more), with M and N
// tails (N not a multiple of 32 too) and K from one stage to 40.
TEST_F(CudaWgmmaGemmTest, MatchesCpuWithinTolerance) {
  // Above 64 rows the persistent kernel (gemm_fp8.cu); the last four are V4.1 prefill shapes
  // (N x K of wq_a, shared w2, wo_b, the 5120^2 projections) with partial row tiles.
  for (const Shape s : {Shape{1, 96, 128}, Shape{3, 100, 5120}, Shape{77, 200, 1280},
                        Shape{300, 288, 2432}, Shape{1100, 136, 1280}, Shape{129, 1280, 5120},
                        Shape{70, 5120, 2304}, Shape{65, 5120, 4096}, Shape{97, 5120, 5120}}) {
    RandomWeight w = random_weight(WeightFormat::kFP8, s.out, s.in, 7);
    auto x = random_rows(static_cast<size_t>(s.rows * s.in), 11);
    Rows cpu(static_cast<size_t>(s.rows * s.out)), gpu(cpu.size(), NAN);
    cpu_.linear({x.data(), s.rows, s.in}, w.view, {cpu.data(), s.rows, s.out}, true);
    gpu_->linear({x.data(), s.rows, s.in}, w.view, {gpu.data(), s.rows, s.out}, true);
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    size_t equal = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      equal += float_bits(gpu[i]) == float_bits(cpu[i]);
      num += (static_cast<double>(gpu[i]) - cpu[i]) * (static_cast<double>(gpu[i]) - cpu[i]);
      den += static_cast<double>(cpu[i]) * cpu[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("wgmma gemm %lldx%lldx%lld: |gpu-cpu|/|cpu| = %.3g, %.2f %% bitwise equal\n",
                static_cast<long long>(s.rows), static_cast<long long>(s.out),
                static_cast<long long>(s.in), rel, 100.0 * equal / gpu.size());
    EXPECT_LT(rel, 1e-2) << s.rows << "x" << s.out << "x" << s.in;
  }
}

// A row's bits alone, in 40- to 1500-row batches and in a 4096-row batch (different kernels and
// tiles: the small-tile kernel up to 64 rows, the persistent one above), at any position in its
// tile.
TEST_F(CudaWgmmaGemmTest, BatchInvariantThroughCudaOps) {
  const int64_t out = 328, in = 1280, rows = 4096;
  RandomWeight w = random_weight(WeightFormat::kFP8, out, in, 3);
  auto x = random_rows(static_cast<size_t>(rows * in), 5);
  Rows all(static_cast<size_t>(rows * out));
  gpu_->linear({x.data(), rows, in}, w.view, {all.data(), rows, out}, true);
  sync();
  auto slice = [&](int64_t r0, int64_t n) {
    return Rows(all.begin() + r0 * out, all.begin() + (r0 + n) * out);
  };
  for (int64_t r0 : {int64_t{0}, int64_t{63}, int64_t{700}, int64_t{4095}}) {
    Rows one(static_cast<size_t>(out));
    gpu_->linear({x.data() + r0 * in, 1, in}, w.view, {one.data(), 1, out}, true);
    sync();
    expect_bitwise(one, slice(r0, 1), "row alone vs in a 4096-row batch");
  }
  for (int64_t n : {int64_t{40}, int64_t{64}, int64_t{65}, int64_t{200}, int64_t{1500}}) {
    const int64_t r0 = 117;
    Rows part(static_cast<size_t>(n * out));
    gpu_->linear({x.data() + r0 * in, n, in}, w.view, {part.data(), n, out}, true);
    sync();
    expect_bitwise(part, slice(r0, n), "batch slice vs in a 4096-row batch");
  }
}

// The launcher directly, each variant on a NaN-poisoned output: the same bits as variant 0 on the
// whole batch and on a 5-row slice (so every output is written). Also prints how many outputs
// the old mma.sync kernel gives the same bits for (their k32 sums come from other instructions).
TEST_F(CudaWgmmaGemmTest, AllVariantsGiveTheSameBits) {
  // K = 11 stages of 128: the two-stage bodies end on a one-stage tail.
  const int64_t rows = 300, out = 200, in = 1408;
  RandomWeight w = random_weight(WeightFormat::kFP8, out, in, 21);
  auto x = random_rows(static_cast<size_t>(rows * in), 23);
  const size_t nx = x.size(), ny = static_cast<size_t>(rows * out);
  float *dx = nullptr, *sc = nullptr, *y = nullptr;
  uint8_t *qa = nullptr, *wd = nullptr, *ws = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&sc, nx / 32 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&qa, nx), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, ny * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&wd, w.data.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, w.scale.size()), cudaSuccess);
  (void)cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice);
  (void)cudaMemcpy(wd, w.data.data(), w.data.size(), cudaMemcpyHostToDevice);
  (void)cudaMemcpy(ws, w.scale.data(), w.scale.size(), cudaMemcpyHostToDevice);
  const cuda::DeviceWeight dw{WeightFormat::kFP8, out, in, wd, ws};
  ASSERT_EQ(cuda::quantize_fp8_e4m3(dx, rows, in, qa, sc, nullptr), cudaSuccess);
  if (!cuda::wgmma_gemm_applies(qa, sc, dw)) {
    for (void* p : {static_cast<void*>(dx), static_cast<void*>(sc), static_cast<void*>(qa),
                    static_cast<void*>(y), static_cast<void*>(wd), static_cast<void*>(ws)}) {
      (void)cudaFree(p);
    }
    GTEST_SKIP() << "wgmma needs an sm_90 device";
  }
  std::vector<float> ref(ny), got(ny);
  (void)cudaMemset(y, 0xff, ny * 4);
  ASSERT_EQ(cuda::block_scaled_gemm_wgmma(0, qa, sc, rows, dw, y, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ref.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t nan = 0;
  for (float v : ref) nan += std::isnan(v);
  EXPECT_EQ(nan, 0u) << "variant 0 left outputs unwritten";
  const int64_t r0 = 7;
  for (int v = 0; v < cuda::kWgmmaGemmVariants; ++v) {
    (void)cudaMemset(y, 0xff, ny * 4);
    ASSERT_EQ(cuda::block_scaled_gemm_wgmma(v, qa, sc, rows, dw, y, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_bitwise(got, ref, ("variant " + std::to_string(v) + ", whole batch").c_str());
    (void)cudaMemset(y, 0xff, ny * 4);
    ASSERT_EQ(
        cuda::block_scaled_gemm_wgmma(v, qa + r0 * in, sc + r0 * (in / 32), 5, dw, y, nullptr),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, static_cast<size_t>(5 * out) * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    expect_bitwise(std::vector<float>(got.begin(), got.begin() + 5 * out),
                   std::vector<float>(ref.begin() + r0 * out, ref.begin() + (r0 + 5) * out),
                   ("variant " + std::to_string(v) + ", 5-row slice").c_str());
  }
  // The persistent kernel's configurations (gemm_fp8.cu): the same bits too.
  for (int v = 0; v < cuda::kFp8Variants; ++v) {
    for (int64_t n : {rows, int64_t{5}}) {
      (void)cudaMemset(y, 0xff, ny * 4);
      const int64_t first = n == rows ? 0 : r0;
      ASSERT_EQ(cuda::block_scaled_gemm_fp8(v, qa + first * in, sc + first * (in / 32), n, dw, y,
                                            nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.data(), y, static_cast<size_t>(n * out) * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      expect_bitwise(
          std::vector<float>(got.begin(), got.begin() + n * out),
          std::vector<float>(ref.begin() + first * out, ref.begin() + (first + n) * out),
          ("fp8 variant " + std::to_string(v) + ", " + std::to_string(n) + " rows").c_str());
    }
  }
  ASSERT_EQ(cuda::block_scaled_gemm_tc_variant(6, qa, sc, rows, dw, y, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t same = 0;
  for (size_t i = 0; i < ny; ++i) same += float_bits(got[i]) == float_bits(ref[i]);
  std::printf("wgmma vs mma.sync kernel: %.3f %% of outputs bitwise equal\n", 100.0 * same / ny);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(sc), static_cast<void*>(qa),
                  static_cast<void*>(y), static_cast<void*>(wd), static_cast<void*>(ws)}) {
    (void)cudaFree(p);
  }
}

}  // namespace
}  // namespace di::backend::testing
