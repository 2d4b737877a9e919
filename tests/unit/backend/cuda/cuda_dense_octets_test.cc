// dense_octets (an octet of threads per (output, row), dense_octets.cu) against the CPU's
// dense_gemm and the kernel it replaces (dense_staged), bitwise: the V4.1 decode shapes (512,
// 32 and 16 outputs of K 5120, 128 of K 512) and small ones whose K / 8 groups end inside a
// round (a partial last round) or whose outputs end inside a block, at 1-8 rows, rounding on and
// off; a row's bits the same alone as in an 8-row call; and what the kernel refuses. Skips
// without a device.
#include <cmath>
#include <cstdio>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

struct DeviceCopy {
  ManagedVector<uint8_t> bytes;
  cuda::DeviceWeight dev;
  explicit DeviceCopy(const WeightView& w) {
    bytes.assign(w.data, w.data + static_cast<size_t>(w.out_features * w.in_features) * 2);
    dev = {w.format, w.out_features, w.in_features, bytes.data(), nullptr};
  }
};

class CudaDenseOctetsTest : public CudaOpsTest {
 protected:
  // dense_octets on `rows` rows of x against the CPU and dense_staged, bitwise; the GPU output.
  Rows check(
      const RandomWeight& w, const DeviceCopy& dw, const float* x, int64_t rows, bool round) {
    const int64_t out = w.view.out_features, in = w.view.in_features;
    Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN), staged(cpu.size(), NAN);
    cpu_.linear({x, rows, in}, w.view, {cpu.data(), rows, out}, round);
    EXPECT_TRUE(cuda::dense_octets_applies(rows, dw.dev));
    EXPECT_EQ(cuda::dense_octets(x, rows, dw.dev, gpu.data(), round, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    char what[128];
    std::snprintf(what, sizeof what, "bf16 %lldx%lld rows %lld round %d",
                  static_cast<long long>(out), static_cast<long long>(in),
                  static_cast<long long>(rows), round);
    expect_bitwise(gpu, cpu, what);
    if (cuda::dense_staged_applies(rows, dw.dev)) {
      EXPECT_EQ(cuda::dense_staged(x, rows, dw.dev, staged.data(), round, nullptr), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_bitwise(gpu, staged, what);
    }
    return gpu;
  }
};

TEST_F(CudaDenseOctetsTest, BitwiseTheCpuAndDenseStagedAtOneToEightRows) {
  // {out, in}: the decode shapes; K 264 = 33 groups (a round of 32 and one group); K 8 (one
  // group); 5, 7 and 9 outputs (blocks of four end inside); 1032 = 129 groups.
  const int64_t shapes[][2] = {{512, 5120}, {32, 5120}, {16, 5120}, {128, 512}, {5, 264},
                               {7, 8},      {9, 1032},  {1, 40},    {3, 256}};
  uint32_t seed = 40;
  for (const auto& s : shapes) {
    const RandomWeight w = random_weight(WeightFormat::kBF16, s[0], s[1], seed);
    const DeviceCopy dw(w.view);
    const Rows x = random_rows(static_cast<size_t>(8 * s[1]), seed + 1);
    for (int64_t rows = 1; rows <= 8; ++rows) {
      for (bool round : {false, true}) check(w, dw, x.data(), rows, round);
    }
    seed += 3;
  }
}

TEST_F(CudaDenseOctetsTest, ARowAloneIsItsRowInABatch) {
  const RandomWeight w = random_weight(WeightFormat::kBF16, 37, 1032, 7);
  const DeviceCopy dw(w.view);
  const Rows x = random_rows(static_cast<size_t>(8 * 1032), 8);
  const Rows batch = check(w, dw, x.data(), 8, true);
  for (int64_t row = 0; row < 8; ++row) {
    const Rows alone = check(w, dw, x.data() + row * 1032, 1, true);
    const Rows in_batch(batch.begin() + row * 37, batch.begin() + (row + 1) * 37);
    expect_bitwise(alone, in_batch, "row alone vs in an 8-row call");
  }
}

TEST_F(CudaDenseOctetsTest, RefusesWhatItCannotRun) {
  const RandomWeight bf = random_weight(WeightFormat::kBF16, 16, 64, 1);
  const DeviceCopy dw(bf.view);
  EXPECT_FALSE(cuda::dense_octets_applies(0, dw.dev));
  EXPECT_FALSE(cuda::dense_octets_applies(9, dw.dev));
  cuda::DeviceWeight f32 = dw.dev;
  f32.format = WeightFormat::kF32;
  EXPECT_FALSE(cuda::dense_octets_applies(1, f32));
  cuda::DeviceWeight tail = dw.dev;
  tail.in_features = 60;  // K % 8 != 0: dot_f32's tail is not in this kernel
  EXPECT_FALSE(cuda::dense_octets_applies(1, tail));
  cuda::DeviceWeight huge = dw.dev;
  huge.in_features = 1 << 20;  // shared memory
  EXPECT_FALSE(cuda::dense_octets_applies(1, huge));
  Rows x(65, 0.0f), y(16, 0.0f);
  EXPECT_EQ(cuda::dense_octets(x.data() + 1, 1, dw.dev, y.data(), true, nullptr),
            cudaErrorInvalidValue);  // x not 16-byte aligned
}

}  // namespace
}  // namespace di::backend::testing
