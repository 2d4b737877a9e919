// The bf16-wgmma FP8 GEMM (gemm_wgmma_bf16.cu), which the tensor path (CudaGemm::kTensor) uses for
// every M on sm_90 when K % 128 == 0: close to the CPU backend (its error is printed), every tile
// variant the same bits, every output written, a row's bits independent of its batch through
// CudaOps, and the folded bf16 activations equal to act_quant's q * scale. Skips without an sm_90
// device.
#include <cstdio>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaWgmmaBf16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "wgmma needs an sm_90 device";
    CudaOptions o;
    o.arena_bytes = size_t{1} << 30;
    o.gemm = CudaGemm::kTensor;
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

// Every tile the dispatch picks (<= 8 rows, <= 64, <= 512, more), M and N tails, K 128..5120.
TEST_F(CudaWgmmaBf16Test, MatchesCpu) {
  for (const Shape s : {Shape{1, 96, 128}, Shape{3, 100, 5120}, Shape{77, 200, 1280},
                        Shape{300, 288, 2304}, Shape{1100, 136, 1280}}) {
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
    std::printf("bf16-wgmma gemm %lldx%lldx%lld: |gpu-cpu|/|cpu| = %.3g, %.2f %% bitwise equal\n",
                static_cast<long long>(s.rows), static_cast<long long>(s.out),
                static_cast<long long>(s.in), rel, 100.0 * equal / gpu.size());
    EXPECT_LT(rel, 1e-2) << s.rows << "x" << s.out << "x" << s.in;
  }
}

TEST_F(CudaWgmmaBf16Test, BatchInvariantThroughCudaOps) {
  const int64_t out = 160, in = 1280, rows = 1500;
  RandomWeight w = random_weight(WeightFormat::kFP8, out, in, 3);
  auto x = random_rows(static_cast<size_t>(rows * in), 5);
  Rows all(static_cast<size_t>(rows * out));
  gpu_->linear({x.data(), rows, in}, w.view, {all.data(), rows, out}, true);
  sync();
  auto slice = [&](int64_t r0, int64_t n) {
    return Rows(all.begin() + r0 * out, all.begin() + (r0 + n) * out);
  };
  for (int64_t r0 : {int64_t{0}, int64_t{63}, int64_t{700}, int64_t{1499}}) {
    Rows one(static_cast<size_t>(out));
    gpu_->linear({x.data() + r0 * in, 1, in}, w.view, {one.data(), 1, out}, true);
    sync();
    expect_bitwise(one, slice(r0, 1), "row alone vs in a 1500-row batch");
  }
  for (int64_t n : {int64_t{5}, int64_t{40}, int64_t{200}, int64_t{600}}) {
    const int64_t r0 = 117;
    Rows part(static_cast<size_t>(n * out));
    gpu_->linear({x.data() + r0 * in, n, in}, w.view, {part.data(), n, out}, true);
    sync();
    expect_bitwise(part, slice(r0, n), "batch slice vs in a 1500-row batch");
  }
}

// Direct launches on a NaN-poisoned output: each variant, on the lane-order weight layout, the same
// bits as the kernel on the original row-major weights (whole batch and a 5-row slice; N = 200 is
// not a multiple of 16, so the layout's padding is exercised). Prints how many outputs equal the
// mma.sync kernel's and the FP8 wgmma's.
TEST_F(CudaWgmmaBf16Test, AllVariantsGiveTheSameBits) {
  const int64_t rows = 300, out = 200, in = 1280;
  RandomWeight w = random_weight(WeightFormat::kFP8, out, in, 21);
  auto x = random_rows(static_cast<size_t>(rows * in), 23);
  const size_t nx = x.size(), ny = static_cast<size_t>(rows * out);
  float *dx = nullptr, *sc = nullptr, *y = nullptr, *q = nullptr;
  uint8_t *qa = nullptr, *wd = nullptr, *ws = nullptr, *wp = nullptr;
  uint16_t* xb = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&q, nx * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&sc, nx / 32 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&qa, nx), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&xb, nx * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, ny * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&wd, w.data.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, w.scale.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&wp, static_cast<size_t>(cuda::wgmma_bf16_layout_bytes(out, in))),
            cudaSuccess);
  (void)cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice);
  (void)cudaMemcpy(wd, w.data.data(), w.data.size(), cudaMemcpyHostToDevice);
  (void)cudaMemcpy(ws, w.scale.data(), w.scale.size(), cudaMemcpyHostToDevice);
  const cuda::DeviceWeight dw{WeightFormat::kFP8, out, in, wd, ws},
      dwp{WeightFormat::kFP8, out, in, wp, ws};
  // In two chunks of rows (96 + 104), as CudaOps uploads large weights.
  ASSERT_EQ(cuda::wgmma_bf16_permute(wd, 96, in, wp, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::wgmma_bf16_permute(wd + 96 * in, out - 96, in, wp + 96 * in, nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::quantize_fp8_bf16(dx, rows, in, xb, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::quantize_fp8(dx, rows, in, q, sc, nullptr), cudaSuccess);
  // The folded activations are q * scale exactly.
  std::vector<float> qf(nx), sf(nx / 32);
  std::vector<uint16_t> bb(nx);
  ASSERT_EQ(cudaMemcpy(qf.data(), q, nx * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(sf.data(), sc, nx / 32 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(bb.data(), xb, nx * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t bad = 0;
  for (size_t i = 0; i < nx; ++i) bad += bf16_to_float(bb[i]) != qf[i] * sf[i / 32];
  EXPECT_EQ(bad, 0u) << "bf16 activations vs q * scale";
  std::vector<float> ref(ny), got(ny);
  (void)cudaMemset(y, 0xff, ny * 4);
  ASSERT_EQ(cuda::block_scaled_gemm_wgmma_bf16_rowmajor(xb, rows, dw, y, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ref.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t nan = 0;
  for (float v : ref) nan += std::isnan(v);
  EXPECT_EQ(nan, 0u) << "the row-major kernel left outputs unwritten";
  const int64_t r0 = 7;
  for (int v = 0; v < cuda::kWgmmaBf16Variants; ++v) {
    (void)cudaMemset(y, 0xff, ny * 4);
    ASSERT_EQ(cuda::block_scaled_gemm_wgmma_bf16(v, xb, rows, dwp, y, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_bitwise(got, ref, ("variant " + std::to_string(v) + ", whole batch").c_str());
    (void)cudaMemset(y, 0xff, ny * 4);
    ASSERT_EQ(cuda::block_scaled_gemm_wgmma_bf16(v, xb + r0 * in, 5, dwp, y, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, static_cast<size_t>(5 * out) * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    expect_bitwise(std::vector<float>(got.begin(), got.begin() + 5 * out),
                   std::vector<float>(ref.begin() + r0 * out, ref.begin() + (r0 + 5) * out),
                   ("variant " + std::to_string(v) + ", 5-row slice").c_str());
  }
  ASSERT_EQ(cuda::quantize_fp8_e4m3(dx, rows, in, qa, sc, nullptr), cudaSuccess);
  for (int other = 0; other < 2; ++other) {
    ASSERT_EQ(other == 0 ? cuda::block_scaled_gemm_tc_variant(6, qa, sc, rows, dw, y, nullptr)
                         : cuda::block_scaled_gemm_wgmma(0, qa, sc, rows, dw, y, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t same = 0;
    for (size_t i = 0; i < ny; ++i) same += float_bits(got[i]) == float_bits(ref[i]);
    std::printf("bf16-wgmma vs %s: %.3f %% of outputs bitwise equal\n",
                other == 0 ? "mma.sync kernel" : "fp8 wgmma kernel", 100.0 * same / ny);
  }
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(q), static_cast<void*>(sc),
                  static_cast<void*>(qa), static_cast<void*>(xb), static_cast<void*>(y),
                  static_cast<void*>(wd), static_cast<void*>(ws), static_cast<void*>(wp)}) {
    (void)cudaFree(p);
  }
}

}  // namespace
}  // namespace di::backend::testing
