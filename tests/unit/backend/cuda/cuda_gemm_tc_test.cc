// The tensor-core FP8 GEMM path (CudaGemm::kTensor): within tolerance of the CPU backend (its
// 32-block sums are the tensor core's, not the CPU's 8-lane order), bitwise batch-invariant across
// its three tile configurations, and every output written. Skips without a device.
#include <cstdio>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaTensorGemmTest : public CudaOpsTest {
 protected:
  CudaOptions options() const override {
    CudaOptions o = CudaOpsTest::options();
    o.gemm = CudaGemm::kTensor;
    return o;
  }
};

struct Shape {
  int64_t rows, out, in;
};

// Shapes hit each tile configuration (<= 16 rows, <= 64, more) with M, N and K tails.
TEST_F(CudaTensorGemmTest, MatchesCpuWithinTolerance) {
  for (const Shape s : {Shape{1, 96, 256}, Shape{5, 100, 5120}, Shape{45, 130, 320},
                        Shape{200, 288, 2080}, Shape{130, 5120, 5120}}) {
    RandomWeight w = random_weight(WeightFormat::kFP8, s.out, s.in, 7);
    auto x = random_rows(static_cast<size_t>(s.rows * s.in), 11);
    Rows cpu(static_cast<size_t>(s.rows * s.out)), gpu(cpu.size(), NAN);
    cpu_.linear({x.data(), s.rows, s.in}, w.view, {cpu.data(), s.rows, s.out}, true);
    gpu_->linear({x.data(), s.rows, s.in}, w.view, {gpu.data(), s.rows, s.out}, true);
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    size_t equal = 0;
    for (size_t i = 0; i < gpu.size(); ++i) equal += float_bits(gpu[i]) == float_bits(cpu[i]);
    const double rel = relative_error(gpu, cpu);
    // Reported so that docs/notes/cuda-kernels.md can quote the measured error.
    std::printf("tensor gemm %lldx%lldx%lld: |gpu-cpu|/|cpu| = %.3g, %.1f %% bitwise equal\n",
                static_cast<long long>(s.rows), static_cast<long long>(s.out),
                static_cast<long long>(s.in), rel, 100.0 * equal / gpu.size());
    EXPECT_LT(rel, 1e-2) << s.rows << "x" << s.out << "x" << s.in;
  }
}

// A row's output is the same bits alone (the <= 16-row tiles), in a 40-row batch (<= 64) and in a
// 300-row batch (128 x 128 tiles), at any position in its tile.
TEST_F(CudaTensorGemmTest, BatchInvariantAcrossTileConfigs) {
  const int64_t out = 160, in = 1056, rows = 300;
  RandomWeight w = random_weight(WeightFormat::kFP8, out, in, 3);
  auto x = random_rows(static_cast<size_t>(rows * in), 5);
  Rows all(static_cast<size_t>(rows * out)), mid(static_cast<size_t>(40 * out)),
      one(static_cast<size_t>(out));
  gpu_->linear({x.data(), rows, in}, w.view, {all.data(), rows, out}, true);
  for (int64_t r = 0; r < rows; r += 23) {
    gpu_->linear({x.data() + r * in, 1, in}, w.view, {one.data(), 1, out}, true);
    sync();
    expect_bitwise(one, Rows(all.begin() + r * out, all.begin() + (r + 1) * out),
                   "row alone vs in a 300-row batch");
  }
  for (int64_t r0 : {int64_t{0}, int64_t{117}, int64_t{260}}) {
    gpu_->linear({x.data() + r0 * in, 40, in}, w.view, {mid.data(), 40, out}, true);
    sync();
    expect_bitwise(mid, Rows(all.begin() + r0 * out, all.begin() + (r0 + 40) * out),
                   "40-row batch vs in a 300-row batch");
  }
}

// The launcher directly on a poisoned (NaN) output buffer: every element must be overwritten.
TEST_F(CudaTensorGemmTest, WritesEveryOutput) {
  for (const Shape s : {Shape{3, 72, 288}, Shape{50, 200, 320}, Shape{131, 136, 96}}) {
    RandomWeight w = random_weight(WeightFormat::kFP8, s.out, s.in, 9);
    auto x = random_rows(static_cast<size_t>(s.rows * s.in), 13);
    const size_t nx = x.size(), ny = static_cast<size_t>(s.rows * s.out);
    float *dx = nullptr, *q = nullptr, *sc = nullptr, *y = nullptr;
    uint8_t *qa = nullptr, *wd = nullptr, *ws = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&q, nx * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&sc, nx / 32 * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&qa, nx), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&y, ny * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&wd, w.data.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ws, w.scale.size()), cudaSuccess);
    (void)cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice);
    (void)cudaMemcpy(wd, w.data.data(), w.data.size(), cudaMemcpyHostToDevice);
    (void)cudaMemcpy(ws, w.scale.data(), w.scale.size(), cudaMemcpyHostToDevice);
    (void)cudaMemset(y, 0xff, ny * 4);  // NaN everywhere
    const cuda::DeviceWeight dw{WeightFormat::kFP8, s.out, s.in, wd, ws};
    EXPECT_EQ(cuda::quantize_fp8_e4m3(dx, s.rows, s.in, qa, sc, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::block_scaled_gemm_tc(qa, sc, s.rows, dw, y, nullptr), cudaSuccess);
    std::vector<float> got(ny);
    EXPECT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    // The bytes are quantize_fp8's values, the scales its scales (bit for bit).
    EXPECT_EQ(cuda::quantize_fp8(dx, s.rows, s.in, q, sc, nullptr), cudaSuccess);
    std::vector<float> qf(nx);
    std::vector<uint8_t> qb(nx);
    EXPECT_EQ(cudaMemcpy(qf.data(), q, nx * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(qb.data(), qa, nx, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0;
    for (size_t i = 0; i < nx; ++i) bad += float_bits(e4m3_to_float(qb[i])) != float_bits(qf[i]);
    EXPECT_EQ(bad, 0u) << "e4m3 bytes vs quantize_fp8 values";
    size_t nan = 0;
    for (float v : got) nan += std::isnan(v);
    EXPECT_EQ(nan, 0u) << s.rows << "x" << s.out << "x" << s.in;
    for (void* p : {static_cast<void*>(dx), static_cast<void*>(q), static_cast<void*>(sc),
                    static_cast<void*>(qa), static_cast<void*>(y), static_cast<void*>(wd),
                    static_cast<void*>(ws)}) {
      (void)cudaFree(p);
    }
  }
}

// Every tile configuration gives the same bits as the default choice, on a whole batch and on a
// 5-row slice of it.
TEST_F(CudaTensorGemmTest, AllTileVariantsGiveTheSameBits) {
  const int64_t rows = 300, out = 200, in = 1056;
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
  ASSERT_EQ(cuda::block_scaled_gemm_tc(qa, sc, rows, dw, y, nullptr), cudaSuccess);
  std::vector<float> ref(ny), got(ny);
  ASSERT_EQ(cudaMemcpy(ref.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  const int64_t r0 = 7;
  for (int v = 0; v < cuda::kTensorGemmVariants; ++v) {
    (void)cudaMemset(y, 0xff, ny * 4);
    ASSERT_EQ(cuda::block_scaled_gemm_tc_variant(v, qa, sc, rows, dw, y, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_bitwise(got, ref, ("variant " + std::to_string(v) + ", whole batch").c_str());
    ASSERT_EQ(
        cuda::block_scaled_gemm_tc_variant(v, qa + r0 * in, sc + r0 * (in / 32), 5, dw, y, nullptr),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), y, static_cast<size_t>(5 * out) * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    expect_bitwise(std::vector<float>(got.begin(), got.begin() + 5 * out),
                   std::vector<float>(ref.begin() + r0 * out, ref.begin() + (r0 + 5) * out),
                   ("variant " + std::to_string(v) + ", 5-row slice").c_str());
  }
  // The fused decode kernel (act_quant inside) on 1, 3 and 8 rows of the batch.
  for (int v = 0; v < cuda::kTensorDecodeVariants; ++v) {
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}}) {
      (void)cudaMemset(y, 0xff, ny * 4);
      ASSERT_EQ(cuda::block_scaled_gemm_tc_decode(v, dx + r0 * in, n, dw, y, nullptr), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.data(), y, static_cast<size_t>(n * out) * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      expect_bitwise(
          std::vector<float>(got.begin(), got.begin() + n * out),
          std::vector<float>(ref.begin() + r0 * out, ref.begin() + (r0 + n) * out),
          ("decode variant " + std::to_string(v) + ", " + std::to_string(n) + " rows").c_str());
    }
  }
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(sc), static_cast<void*>(qa),
                  static_cast<void*>(y), static_cast<void*>(wd), static_cast<void*>(ws)}) {
    (void)cudaFree(p);
  }
}

}  // namespace
}  // namespace di::backend::testing
