// The register-tiled dense product (dense_tiled.cu) against the CPU's dense_gemm: bitwise for
// every tile shape, BF16 and F32 weights, rounding on and off, K with and without a tail (and K
// below 8: all tail), unaligned x, grouped weights; a row's bits the same alone as in a 300-row
// call; and CudaOps' routing (few rows: the streaming kernels, many: the tiled one) giving the
// same bits at every row count. Skips without a device.
#include <cmath>
#include <cstdio>
#include <tuple>
#include <utility>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

using cuda::DenseTiledTile;

constexpr DenseTiledTile kTiles[] = {DenseTiledTile::kAuto, DenseTiledTile::kNarrow,
                                     DenseTiledTile::kTiny, DenseTiledTile::kSmall,
                                     DenseTiledTile::kLarge};

// The weight's bytes in managed memory, as the kernel reads them.
struct DeviceCopy {
  ManagedVector<uint8_t> bytes;
  cuda::DeviceWeight dev;
  explicit DeviceCopy(const WeightView& w) {
    const size_t elem = w.format == WeightFormat::kBF16 ? 2 : 4;
    bytes.assign(w.data, w.data + static_cast<size_t>(w.out_features * w.in_features) * elem);
    dev = {w.format, w.out_features, w.in_features, bytes.data(), nullptr};
  }
};

struct Case {
  WeightFormat format;
  int64_t out, in;
  int groups;
  bool round;
  int x_offset;  // floats: 1 leaves x unaligned (the scalar loads)
};

class CudaDenseTiledTest : public CudaOpsTest {
 protected:
  // dense_tiled with `tile` on `rows` rows against the CPU, bitwise; returns the GPU output.
  Rows check(const Case& c, int64_t rows, DenseTiledTile tile, uint32_t seed) {
    RandomWeight w = random_weight(c.format, c.out, c.in, seed);
    DeviceCopy dw(w.view);
    const int64_t cols = c.in * c.groups;
    const Rows xall = random_rows(static_cast<size_t>(rows * cols + c.x_offset), seed + 1);
    const float* x = xall.data() + c.x_offset;
    Rows cpu(static_cast<size_t>(rows * c.out)), gpu(cpu.size(), NAN);
    if (c.groups == 1) {
      cpu_.linear({x, rows, cols}, w.view, {cpu.data(), rows, c.out}, c.round);
    } else {
      cpu_.grouped_linear({x, rows, cols}, w.view, c.groups, {cpu.data(), rows, c.out}, c.round);
    }
    EXPECT_EQ(cuda::dense_tiled(x, rows, dw.dev, c.groups, gpu.data(), c.round, nullptr, tile),
              cudaSuccess);
    char what[160];
    std::snprintf(what, sizeof what, "%s %lldx%lld groups %d round %d offset %d rows %lld tile %d",
                  c.format == WeightFormat::kBF16 ? "bf16" : "f32", static_cast<long long>(c.out),
                  static_cast<long long>(c.in), c.groups, c.round, c.x_offset,
                  static_cast<long long>(rows), static_cast<int>(tile));
    expect_bitwise(gpu, cpu, what);
    return gpu;
  }
};

TEST_F(CudaDenseTiledTest, EveryTileIsBitwiseTheCpu) {
  // K 96: no tail; 101: tail 5 and no quad loads; 1028: quad loads and a tail of 4; 5: K < 8.
  const Case cases[] = {
      {WeightFormat::kBF16, 96, 96, 1, true, 0},   {WeightFormat::kBF16, 40, 101, 1, false, 0},
      {WeightFormat::kF32, 24, 1028, 1, false, 0}, {WeightFormat::kF32, 70, 101, 1, true, 0},
      {WeightFormat::kBF16, 33, 1028, 1, true, 1}, {WeightFormat::kBF16, 17, 5, 1, false, 0},
      {WeightFormat::kBF16, 160, 96, 4, true, 0},  {WeightFormat::kF32, 120, 1028, 3, false, 0},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}}) {
      for (const DenseTiledTile tile : kTiles) check(c, rows, tile, seed);
    }
    seed += 2;
  }
}

TEST_F(CudaDenseTiledTest, ManyRowsAreBitwiseTheCpu) {
  for (const DenseTiledTile tile : {DenseTiledTile::kAuto, DenseTiledTile::kLarge}) {
    check({WeightFormat::kBF16, 64, 517, 1, true, 0}, 4096, tile, 40);
    check({WeightFormat::kF32, 48, 136, 2, false, 0}, 4096, tile, 42);
  }
}

// Row 37 alone and rows 30..69 against the 300-row call: the same bits (each output's arithmetic
// is fixed, whatever the tile and the launch).
TEST_F(CudaDenseTiledTest, RowsAreBatchInvariant) {
  const Case c{WeightFormat::kBF16, 96, 1028, 1, true, 0};
  RandomWeight w = random_weight(c.format, c.out, c.in, 50);
  DeviceCopy dw(w.view);
  const int64_t rows = 300;
  const Rows x = random_rows(static_cast<size_t>(rows * c.in), 51);
  for (const DenseTiledTile tile : kTiles) {
    Rows all(static_cast<size_t>(rows * c.out), NAN);
    ASSERT_EQ(cuda::dense_tiled(x.data(), rows, dw.dev, 1, all.data(), true, nullptr, tile),
              cudaSuccess);
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{37, 1}, {30, 40}}) {
      Rows part(static_cast<size_t>(count * c.out), NAN);
      ASSERT_EQ(cuda::dense_tiled(x.data() + first * c.in, count, dw.dev, 1, part.data(), true,
                                  nullptr, tile),
                cudaSuccess);
      sync();
      for (int64_t i = 0; i < count * c.out; ++i) {
        ASSERT_EQ(float_bits(part[static_cast<size_t>(i)]),
                  float_bits(all[static_cast<size_t>(first * c.out + i)]))
            << "tile " << static_cast<int>(tile) << " rows " << first << " + " << count
            << ", element " << i;
      }
    }
  }
}

// Through CudaOps (the exact path): 1 and 7 rows take the streaming kernels, many rows the tiled
// one (dense_tiled_applies: 512 outputs from 64 rows, 128 x 203 at 300 but not 64, 24 x 16384 at
// 300 by its long K); every count is bitwise the CPU, and row 37 of 300 equals row 37 alone.
TEST_F(CudaDenseTiledTest, LinearRoutingIsBitwiseAndBatchInvariant) {
  for (const auto& [format, out, in] :
       {std::tuple<WeightFormat, int64_t, int64_t>{WeightFormat::kBF16, 512, 520},
        {WeightFormat::kF32, 24, 16384},
        {WeightFormat::kBF16, 128, 203}}) {
    RandomWeight w = random_weight(format, out, in, 60);
    const Rows x = random_rows(static_cast<size_t>(300 * in), 61);
    Rows full(static_cast<size_t>(300 * out));
    for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}}) {
      Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN);
      cpu_.linear({x.data(), rows, in}, w.view, {cpu.data(), rows, out}, true);
      gpu_->linear({x.data(), rows, in}, w.view, {gpu.data(), rows, out}, true);
      expect_bitwise(gpu, cpu, "linear");
      if (rows == 300) full = gpu;
    }
    Rows one(static_cast<size_t>(out), NAN);
    gpu_->linear({x.data() + 37 * in, 1, in}, w.view, {one.data(), 1, out}, true);
    sync();
    for (int64_t o = 0; o < out; ++o) {
      ASSERT_EQ(float_bits(one[static_cast<size_t>(o)]),
                float_bits(full[static_cast<size_t>(37 * out + o)]))
          << "output " << o;
    }
  }
  // grouped_linear at many rows (the tiled kernel on the exact path).
  const int64_t rows = 300, groups = 4, out = groups * 40, in = 101;
  RandomWeight w = random_weight(WeightFormat::kBF16, out, in, 62);
  const Rows x = random_rows(static_cast<size_t>(rows * groups * in), 63);
  Rows cpu(static_cast<size_t>(rows * out)), gpu(cpu.size(), NAN);
  cpu_.grouped_linear({x.data(), rows, groups * in}, w.view, static_cast<int>(groups),
                      {cpu.data(), rows, out}, true);
  gpu_->grouped_linear({x.data(), rows, groups * in}, w.view, static_cast<int>(groups),
                       {gpu.data(), rows, out}, true);
  expect_bitwise(gpu, cpu, "grouped_linear");
}

}  // namespace
}  // namespace di::backend::testing
