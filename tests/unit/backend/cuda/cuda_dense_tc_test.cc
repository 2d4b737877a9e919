// Dense BF16 products on the tensor path (dense_bf16_tc.cu: weights with >= 16K outputs, the
// heads): within tolerance of the CPU's fp32 order, every output written, and a row's bits the
// same alone, in a slice or in a 300-row call (batch invariance). Skips without a device.
#include <cmath>

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

TEST_F(CudaDenseTensorTest, HeadShapedProductIsCloseAndBatchInvariant) {
  // K = 96, 320, 384 split K in 1, 2, 4 parts; 40 outputs past a multiple of 64.
  const int64_t rows = 300, out = 16384 + 40;
  for (const auto& [in, round] :
       {std::pair<int64_t, bool>{96, false}, {320, false}, {320, true}, {384, false}}) {
    RandomWeight w = random_weight(WeightFormat::kBF16, out, in, 3);
    const Rows x = random_rows(static_cast<size_t>(rows * in), 4);
    Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN);
    cpu_.linear({x.data(), rows, in}, w.view, {cpu.data(), rows, out}, round);
    gpu_->linear({x.data(), rows, in}, w.view, {gpu.data(), rows, out}, round);
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    for (size_t i = 0; i < cpu.size(); ++i) {
      ASSERT_FALSE(std::isnan(gpu[i])) << "output " << i << " not written";
    }
    const double rel = relative_error(gpu, cpu);
    std::printf("dense bf16 tensor path (K %lld, round %d): relative L2 error %.3g\n",
                static_cast<long long>(in), round, rel);
    EXPECT_LT(rel, round ? 5e-3 : 1e-5);
    // Row 37 alone, rows 30..69 as a slice, against the 300-row call: identical bits.
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{37, 1}, {30, 40}, {0, 9}}) {
      Rows part(static_cast<size_t>(count * out), NAN);
      gpu_->linear({x.data() + first * in, count, in}, w.view, {part.data(), count, out}, round);
      sync();
      for (int64_t i = 0; i < count * out; ++i) {
        ASSERT_EQ(float_bits(part[static_cast<size_t>(i)]),
                  float_bits(gpu[static_cast<size_t>(first * out + i)]))
            << "rows " << first << " + " << count << ", element " << i;
      }
    }
  }
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

}  // namespace
}  // namespace di::backend::testing
