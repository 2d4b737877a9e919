// Dense BF16 products on the tensor path (dense_bf16_tc.cu: weights with >= 16K outputs, the
// heads, and the compressor's 512): within tolerance of the CPU's fp32 order, every output written,
// and a row's bits the same alone, in a slice or in a 300-row call (batch invariance); the
// row-group and shared-tile kernels give the same bits. Skips without a device.
#include <cmath>
#include <initializer_list>
#include <utility>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaDenseTensorTest : public CudaOpsTest {
 protected:
  CudaOptions options() const override {
    CudaOptions o = CudaOpsTest::options();
    o.gemm = CudaGemm::kTensor;
    return o;
  }
};

// x [rows, in] times w on the CPU and on the device, every device output written; returns the
// device's outputs and their relative L2 error against the CPU's in *rel.
Rows device_and_cpu(const Ops& cpu_ops,
                    const Ops& gpu_ops,
                    const RandomWeight& w,
                    const Rows& x,
                    int64_t rows,
                    int64_t in,
                    int64_t out,
                    bool round,
                    double* rel) {
  Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN);
  cpu_ops.linear({x.data(), rows, in}, w.view, {cpu.data(), rows, out}, round);
  gpu_ops.linear({x.data(), rows, in}, w.view, {gpu.data(), rows, out}, round);
  sync();
  EXPECT_TRUE(gpu_ops.status().ok()) << gpu_ops.status().to_string();
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_FALSE(std::isnan(gpu[i])) << "output " << i << " not written";
    if (std::isnan(gpu[i])) break;
  }
  *rel = relative_error(gpu, cpu);
  return gpu;
}

// Each (first, count) slice of x's rows as a call of its own gives the bits of `full` (the call
// over all rows): batch invariance.
void expect_slices_match(const Ops& gpu_ops,
                         const RandomWeight& w,
                         const Rows& x,
                         const Rows& full,
                         int64_t in,
                         int64_t out,
                         bool round,
                         std::initializer_list<std::pair<int64_t, int64_t>> slices) {
  for (const auto& [first, count] : slices) {
    Rows part(static_cast<size_t>(count * out), NAN);
    gpu_ops.linear({x.data() + first * in, count, in}, w.view, {part.data(), count, out}, round);
    sync();
    for (int64_t i = 0; i < count * out; ++i) {
      ASSERT_EQ(float_bits(part[static_cast<size_t>(i)]),
                float_bits(full[static_cast<size_t>(first * out + i)]))
          << "rows " << first << " + " << count << ", element " << i;
    }
  }
}

TEST_F(CudaDenseTensorTest, HeadShapedProductIsCloseAndBatchInvariant) {
  // K = 96, 320, 384 split K in 1, 2, 4 parts; 40 outputs past a multiple of 64.
  const int64_t rows = 300, out = 16384 + 40;
  for (const auto& [in, round] :
       {std::pair<int64_t, bool>{96, false}, {320, false}, {320, true}, {384, false}}) {
    RandomWeight w = random_weight(WeightFormat::kBF16, out, in, 3);
    const Rows x = random_rows(static_cast<size_t>(rows * in), 4);
    double rel = 0;
    const Rows gpu = device_and_cpu(cpu_, *gpu_, w, x, rows, in, out, round, &rel);
    ASSERT_FALSE(HasFailure());
    std::printf("dense bf16 tensor path (K %lld, round %d): relative L2 error %.3g\n",
                static_cast<long long>(in), round, rel);
    EXPECT_LT(rel, round ? 5e-3 : 1e-5);
    // Row 37 alone, rows 30..69 as a slice, against the 300-row call: identical bits.
    expect_slices_match(*gpu_, w, x, gpu, in, out, round, {{37, 1}, {30, 40}, {0, 9}});
  }
}

// The compressor's shape (512 outputs: the tensor path from kDenseTcLinearMinOutputs): fp32
// outputs within tolerance of the CPU, and a row's bits the same whether the call takes the row
// groups (1-16 rows), the wgmma or shared tile (32 rows and more) or 300 rows.
TEST_F(CudaDenseTensorTest, CompressorShapedProductIsCloseAndBatchInvariant) {
  const int64_t rows = 300, out = 512, in = 1280;
  RandomWeight w = random_weight(WeightFormat::kBF16, out, in, 7);
  const Rows x = random_rows(static_cast<size_t>(rows * in), 8);
  double rel = 0;
  const Rows gpu = device_and_cpu(cpu_, *gpu_, w, x, rows, in, out, false, &rel);
  ASSERT_FALSE(HasFailure());
  std::printf("compressor-shaped bf16 tensor path: relative L2 error %.3g\n", rel);
  EXPECT_LT(rel, 1e-5);
  EXPECT_GT(rel, 0.0) << "expected tensor-core sums, not the CPU's fp32 order";
  expect_slices_match(*gpu_, w, x, gpu, in, out, false,
                      {{37, 1}, {30, 8}, {0, 16}, {100, 32}, {200, 64}, {1, 299}});
}

// The grouped output projection (wo_a's shape, scaled down): each group's 48 outputs read their
// own 128-wide slice of x (K split in 4); close to the CPU's per-group products, and
// batch-invariant.
TEST_F(CudaDenseTensorTest, GroupedProductIsCloseAndBatchInvariant) {
  const int64_t rows = 70, groups = 4, out = groups * 48, in = 128;
  RandomWeight w = random_weight(WeightFormat::kBF16, out, in, 5);
  const Rows x = random_rows(static_cast<size_t>(rows * groups * in), 6);
  Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN), one(static_cast<size_t>(out));
  cpu_.grouped_linear({x.data(), rows, groups * in}, w.view, static_cast<int>(groups),
                      {cpu.data(), rows, out}, true);
  gpu_->grouped_linear({x.data(), rows, groups * in}, w.view, static_cast<int>(groups),
                       {gpu.data(), rows, out}, true);
  gpu_->grouped_linear({x.data() + 33 * groups * in, 1, groups * in}, w.view,
                       static_cast<int>(groups), {one.data(), 1, out}, true);
  sync();
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_FALSE(std::isnan(gpu[i])) << "output " << i << " not written";
  }
  EXPECT_LT(relative_error(gpu, cpu), 5e-3);
  for (int64_t o = 0; o < out; ++o) {
    ASSERT_EQ(float_bits(one[static_cast<size_t>(o)]),
              float_bits(gpu[static_cast<size_t>(33 * out + o)]))
        << "output " << o;
  }
}

// The shared-tile kernel (many rows) against the row-group kernel (few rows) on the same inputs:
// every output's bits equal, for 1..600 rows (tails of the 16-, 32- and 64-row tiles and the
// 128-feature tile; the 64-row tile also forced at <= 32 rows),
// K split in 1, 2 and 4 parts with an odd number of 32-chunks per part, grouped and not, rounded
// and not. kAuto must agree with both.
TEST_F(CudaDenseTensorTest, SharedTileKernelMatchesRowGroupKernelBitwise) {
  using cuda::DenseTcKernel;
  struct Shape {
    int64_t out, in;
    int groups;
  };
  const int64_t max_rows = 600;
  int seed = 11;
  for (const Shape& sh : {Shape{2048 + 40, 96, 1}, Shape{1024 + 8, 320, 1}, Shape{1040, 384, 1},
                          Shape{512, 1280, 1}, Shape{4 * 128, 384, 4}, Shape{2 * 256, 160, 2}}) {
    RandomWeight w = random_weight(WeightFormat::kBF16, sh.out, sh.in, seed++);
    const ManagedVector<uint8_t> wd(w.data.begin(), w.data.end());  // device-visible copy
    const cuda::DeviceWeight dw{WeightFormat::kBF16, sh.out, sh.in, wd.data(), nullptr};
    ASSERT_TRUE(cuda::dense_bf16_tc_tiled_supports(dw, sh.groups));
    const int64_t cols = sh.groups * sh.in;
    const Rows xf = random_rows(static_cast<size_t>(max_rows * cols), seed++);
    ManagedVector<uint16_t> x(xf.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = float_to_bf16(xf[i]);
    for (const int64_t rows : {1, 7, 16, 17, 32, 33, 64, 65, 129, 256, 300, 600}) {
      for (const bool round : {false, true}) {
        const size_t n = static_cast<size_t>(rows * sh.out);
        Rows a(n, NAN), b(n, NAN), c(n, NAN), d(n, NAN);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, a.data(), round, nullptr,
                                      DenseTcKernel::kRowGroups),
                  cudaSuccess);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, b.data(), round, nullptr,
                                      DenseTcKernel::kSharedTile),
                  cudaSuccess);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, c.data(), round, nullptr,
                                      DenseTcKernel::kAuto),
                  cudaSuccess);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, d.data(), round, nullptr,
                                      DenseTcKernel::kSharedTileWide),
                  cudaSuccess);
        sync();
        for (size_t i = 0; i < n; ++i) {
          ASSERT_FALSE(std::isnan(a[i])) << "output " << i << " not written";
          ASSERT_EQ(float_bits(a[i]), float_bits(b[i]))
              << "out " << sh.out << " in " << sh.in << " groups " << sh.groups << " rows " << rows
              << " round " << round << " element " << i;
          ASSERT_EQ(float_bits(a[i]), float_bits(c[i])) << "kAuto, rows " << rows;
          ASSERT_EQ(float_bits(a[i]), float_bits(d[i])) << "64-row tile, rows " << rows;
        }
      }
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
