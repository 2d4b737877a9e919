// The wgmma dense BF16 kernel (dense_bf16_wgmma.cu) against the row-group kernel of
// dense_bf16_tc.cu: every output's bits equal (the contract that keeps a request's logits
// independent of the batch), on data whose magnitudes span many binades (per-row, per-feature and
// per-element powers of two, exact zeros and sign mixes that cancel), for 1..300 rows (partial
// 64- and 128-row tiles, partial 128-feature tiles), K of 1..40 chunks split in 1, 2 and 4 parts
// (parts ending mid-stage), grouped and not, rounded and not. kAuto must agree. On a device other
// than sm_90 the kernel must refuse (cudaErrorNotSupported) and kAuto still match. Skips without
// a device.
#include <cmath>
#include <random>

#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaDenseWgmmaTest : public CudaOpsTest {};

// bf16 bits of n values: normal * 2^(row or feature exponent + element exponent), with some
// exact zeros; `line` elements share a line exponent in [-line_span, line_span].
std::vector<uint16_t> wide_range_bf16(size_t n, int64_t line, int line_span, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> line_exp(-line_span, line_span), elem_exp(-12, 12);
  std::uniform_int_distribution<int> pick(0, 15);
  std::vector<uint16_t> v(n);
  int le = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % static_cast<size_t>(line) == 0) le = line_exp(rng);
    const int kind = pick(rng);
    float f = normal(rng);
    if (kind == 0) f = 0.0f;          // exact zeros
    if (kind == 1) f = -f * 0x1p20f;  // large terms that cancel against others
    v[i] = float_to_bf16(std::ldexp(f, le + (kind >= 2 ? elem_exp(rng) : 0)));
  }
  return v;
}

TEST_F(CudaDenseWgmmaTest, MatchesRowGroupKernelBitwiseOverWideMagnitudes) {
  using cuda::DenseTcKernel;
  struct Shape {
    int64_t out, in;
    int groups;
  };
  const int64_t max_rows = 300;
  const bool sm90 = cuda::dense_bf16_wgmma_available();
  uint32_t seed = 71;
  for (const Shape& sh : {Shape{2048 + 40, 96, 1}, Shape{1024 + 8, 320, 1}, Shape{1040, 384, 1},
                          Shape{512, 1280, 1}, Shape{256 + 16, 5120, 1}, Shape{4 * 128, 384, 4},
                          Shape{2 * 256, 160, 2}, Shape{384, 32, 1}}) {
    const std::vector<uint16_t> wh =
        wide_range_bf16(static_cast<size_t>(sh.out * sh.in), sh.in, 20, seed++);
    ManagedVector<uint16_t> wd(wh.begin(), wh.end());
    const cuda::DeviceWeight dw{WeightFormat::kBF16, sh.out, sh.in,
                                reinterpret_cast<const uint8_t*>(wd.data()), nullptr};
    ASSERT_TRUE(cuda::dense_bf16_tc_tiled_supports(dw, sh.groups));
    const int64_t cols = sh.groups * sh.in;
    const std::vector<uint16_t> xh =
        wide_range_bf16(static_cast<size_t>(max_rows * cols), cols, 40, seed++);
    ManagedVector<uint16_t> x(xh.begin(), xh.end());
    for (const int64_t rows : {1, 8, 63, 64, 65, 100, 128, 129, 200, 256, 300}) {
      for (const bool round : {false, true}) {
        const size_t n = static_cast<size_t>(rows * sh.out);
        Rows ref(n, NAN), wg(n, NAN), wide(n, NAN), drained(n, NAN), autok(n, NAN);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, ref.data(), round, nullptr,
                                      DenseTcKernel::kRowGroups),
                  cudaSuccess);
        ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, autok.data(), round, nullptr,
                                      DenseTcKernel::kAuto),
                  cudaSuccess);
        const cudaError_t e1 = cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, wg.data(), round,
                                                   nullptr, DenseTcKernel::kWgmma);
        const cudaError_t e2 = cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, wide.data(),
                                                   round, nullptr, DenseTcKernel::kWgmmaWide);
        const cudaError_t e3 = cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, drained.data(),
                                                   round, nullptr, DenseTcKernel::kWgmmaDrain);
        sync();
        ASSERT_EQ(e3, sm90 ? cudaSuccess : cudaErrorNotSupported);
        ASSERT_EQ(e1, sm90 ? cudaSuccess : cudaErrorNotSupported);
        ASSERT_EQ(e2, sm90 ? cudaSuccess : cudaErrorNotSupported);
        size_t finite = 0;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_FALSE(std::isnan(ref[i])) << "output " << i << " not written";
          finite += std::isfinite(ref[i]) && ref[i] != 0.0f;
          ASSERT_EQ(float_bits(ref[i]), float_bits(autok[i])) << "kAuto, rows " << rows;
          if (!sm90) continue;
          ASSERT_EQ(float_bits(ref[i]), float_bits(wg[i]))
              << "out " << sh.out << " in " << sh.in << " groups " << sh.groups << " rows " << rows
              << " round " << round << " element " << i << ": " << ref[i] << " vs " << wg[i];
          ASSERT_EQ(float_bits(ref[i]), float_bits(wide[i]))
              << "128-row tile, rows " << rows << " element " << i;
          ASSERT_EQ(float_bits(ref[i]), float_bits(drained[i]))
              << "drained per stage, rows " << rows << " element " << i;
        }
        EXPECT_GT(finite, n * 9 / 10) << "the data must exercise the sums, not overflow";
      }
    }
  }
}

// The head's shape at the rows the decode step runs (64 and 256 rows of a 129,280 x 5,120
// product would take seconds on the row-group kernel's reference here; 2,048 + 40 features keep
// the K and the tile structure): kAuto on the wgmma kernel gives the shared-tile kernel's bits.
TEST_F(CudaDenseWgmmaTest, HeadKMatchesSharedTileKernelBitwise) {
  using cuda::DenseTcKernel;
  const int64_t out = 2048 + 40, in = 5120;
  const std::vector<uint16_t> wh = wide_range_bf16(static_cast<size_t>(out * in), in, 6, 5);
  ManagedVector<uint16_t> wd(wh.begin(), wh.end());
  const cuda::DeviceWeight dw{WeightFormat::kBF16, out, in,
                              reinterpret_cast<const uint8_t*>(wd.data()), nullptr};
  const std::vector<uint16_t> xh = wide_range_bf16(static_cast<size_t>(256 * in), in, 6, 6);
  ManagedVector<uint16_t> x(xh.begin(), xh.end());
  for (const int64_t rows : {64, 256}) {
    const size_t n = static_cast<size_t>(rows * out);
    Rows tile(n, NAN), autok(n, NAN);
    ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, 1, tile.data(), true, nullptr,
                                  DenseTcKernel::kSharedTileWide),
              cudaSuccess);
    ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, 1, autok.data(), true, nullptr,
                                  DenseTcKernel::kAuto),
              cudaSuccess);
    sync();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(float_bits(tile[i]), float_bits(autok[i])) << "rows " << rows << " element " << i;
    }
  }
}

// The warp-specialised head kernel (dense_bf16_wgmma_ws.cu) from x in the k32-logical order:
// the shared-tile kernel's bits for head-sized weights (>= kDenseTcTiledMinOutputs outputs: one
// K part) at 1..300 rows (partial 128- and 256-row tiles, a partial feature tile), with both
// tiles and the automatic pick, from bf16 and from fp32 x (the many-row shapes four times over:
// a pipeline race showed as a few wrong CTAs per call, session 25); a slice of rows alone gives the
// same bits as in the full call. Refused (cudaErrorNotSupported) off sm_90.
TEST_F(CudaDenseWgmmaTest, WarpSpecialisedHeadMatchesSharedTileBitwise) {
  using cuda::DenseTcKernel;
  const bool sm90 = cuda::dense_bf16_wgmma_available();
  uint32_t seed = 91;
  for (const int64_t in : {640, 5120}) {
    const int64_t out = cuda::kDenseTcTiledMinOutputs + (in == 640 ? 40 : 8);
    const std::vector<uint16_t> wh = wide_range_bf16(static_cast<size_t>(out * in), in, 6, seed++);
    ManagedVector<uint16_t> wd(wh.begin(), wh.end());
    const cuda::DeviceWeight dw{WeightFormat::kBF16, out, in,
                                reinterpret_cast<const uint8_t*>(wd.data()), nullptr};
    ASSERT_EQ(cuda::dense_bf16_tc_k_parts(dw), 1);
    ASSERT_EQ(cuda::dense_bf16_ws_supports(dw, 1), sm90);
    const int64_t max_rows = 300;
    const std::vector<uint16_t> xh =
        wide_range_bf16(static_cast<size_t>(max_rows * in), in, 6, seed++);
    ManagedVector<uint16_t> x(xh.begin(), xh.end());
    ManagedVector<float> xf(xh.size());
    for (size_t i = 0; i < xh.size(); ++i) xf[i] = bf16_to_float(xh[i]);
    ManagedVector<uint16_t> xl(xh.size()), xlf(xh.size());
    ASSERT_EQ(cuda::bf16_to_k32_logical(x.data(), max_rows, in, xl.data(), nullptr), cudaSuccess);
    ASSERT_EQ(cuda::f32_to_bf16_k32_logical(xf.data(), max_rows, in, xlf.data(), nullptr),
              cudaSuccess);
    sync();
    for (size_t i = 0; i < xh.size(); ++i) ASSERT_EQ(xl[i], xlf[i]) << "element " << i;
    for (const int64_t rows :
         {1, 8, 64, 96, 128, 129, 200, 256, 257, 300, 256, 300, 256, 300, 256, 300}) {
      const size_t n = static_cast<size_t>(rows * out);
      Rows ref(n, NAN), t128(n, NAN), t256(n, NAN), autok(n, NAN);
      ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, 1, ref.data(), false, nullptr,
                                    in == 640 && rows <= 8 ? DenseTcKernel::kRowGroups
                                                           : DenseTcKernel::kSharedTileWide),
                cudaSuccess);
      const cudaError_t e1 =
          cuda::dense_bf16_wgmma_ws(xl.data(), rows, dw, 1, t128.data(), false, nullptr, 128);
      const cudaError_t e2 =
          cuda::dense_bf16_wgmma_ws(xl.data(), rows, dw, 1, t256.data(), false, nullptr, 256);
      const cudaError_t e3 =
          cuda::dense_bf16_wgmma_ws(xlf.data(), rows, dw, 1, autok.data(), false, nullptr);
      sync();
      const cudaError_t want = sm90 ? cudaSuccess : cudaErrorNotSupported;
      ASSERT_EQ(e1, want);
      ASSERT_EQ(e2, want);
      ASSERT_EQ(e3, want);
      if (!sm90) continue;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_FALSE(std::isnan(ref[i])) << "output " << i << " not written";
        ASSERT_EQ(float_bits(ref[i]), float_bits(t128[i]))
            << "128-row tile, in " << in << " rows " << rows << " element " << i;
        ASSERT_EQ(float_bits(ref[i]), float_bits(t256[i]))
            << "256-row tile, in " << in << " rows " << rows << " element " << i;
        ASSERT_EQ(float_bits(ref[i]), float_bits(autok[i]))
            << "picked tile, in " << in << " rows " << rows << " element " << i;
      }
    }
    if (!sm90) continue;
    // Rows 100..107 alone against the same rows of a 300-row call.
    Rows all(static_cast<size_t>(max_rows * out)), part(static_cast<size_t>(8 * out));
    ASSERT_EQ(cuda::dense_bf16_wgmma_ws(xl.data(), max_rows, dw, 1, all.data(), true, nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda::dense_bf16_wgmma_ws(xl.data() + 100 * in, 8, dw, 1, part.data(), true, nullptr),
              cudaSuccess);
    sync();
    for (size_t i = 0; i < part.size(); ++i) {
      ASSERT_EQ(float_bits(part[i]), float_bits(all[static_cast<size_t>(100 * out) + i]))
          << "row slice, element " << i;
    }
  }
}

// The warp-specialised kernel for products of several K parts (parts ending mid-stage) and
// grouped x (wo_a's shape class), on the 128-row tile: the row-group kernel's bits at 1..300 rows,
// with a partial feature tile and a partial row tile; the 256-row tile is refused there.
TEST_F(CudaDenseWgmmaTest, WarpSpecialisedPartsAndGroupsMatchRowGroupsBitwise) {
  using cuda::DenseTcKernel;
  struct Shape {
    int64_t out, in;
    int groups;
  };
  const bool sm90 = cuda::dense_bf16_wgmma_available();
  uint32_t seed = 131;
  for (const Shape& sh : {Shape{1024 + 40, 384, 1}, Shape{512, 5120, 1}, Shape{8 * 256, 640, 8},
                          Shape{4 * 128, 320, 4}}) {
    const std::vector<uint16_t> wh =
        wide_range_bf16(static_cast<size_t>(sh.out * sh.in), sh.in, 20, seed++);
    ManagedVector<uint16_t> wd(wh.begin(), wh.end());
    const cuda::DeviceWeight dw{WeightFormat::kBF16, sh.out, sh.in,
                                reinterpret_cast<const uint8_t*>(wd.data()), nullptr};
    ASSERT_GT(cuda::dense_bf16_tc_k_parts(dw), 1);
    ASSERT_EQ(cuda::dense_bf16_ws_supports(dw, sh.groups), sm90);
    const int64_t max_rows = 300, cols = sh.groups * sh.in;
    const std::vector<uint16_t> xh =
        wide_range_bf16(static_cast<size_t>(max_rows * cols), cols, 40, seed++);
    ManagedVector<uint16_t> x(xh.begin(), xh.end()), xl(xh.size());
    ASSERT_EQ(cuda::bf16_to_k32_logical(x.data(), max_rows, cols, xl.data(), nullptr), cudaSuccess);
    for (const int64_t rows : {1, 8, 64, 65, 100, 128, 129, 300, 300}) {
      const size_t n = static_cast<size_t>(rows * sh.out);
      Rows ref(n, NAN), ws(n, NAN), wide(n, NAN);
      ASSERT_EQ(cuda::dense_bf16_tc(x.data(), rows, dw, sh.groups, ref.data(), true, nullptr,
                                    DenseTcKernel::kRowGroups),
                cudaSuccess);
      const cudaError_t e1 =
          cuda::dense_bf16_wgmma_ws(xl.data(), rows, dw, sh.groups, ws.data(), true, nullptr);
      const cudaError_t e2 = cuda::dense_bf16_wgmma_ws(xl.data(), rows, dw, sh.groups, wide.data(),
                                                       true, nullptr, 256);
      sync();
      ASSERT_EQ(e1, sm90 ? cudaSuccess : cudaErrorNotSupported);
      ASSERT_EQ(e2, sm90 ? cudaErrorInvalidValue : cudaErrorNotSupported);
      if (!sm90) continue;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_FALSE(std::isnan(ref[i])) << "output " << i << " not written";
        ASSERT_EQ(float_bits(ref[i]), float_bits(ws[i]))
            << "out " << sh.out << " in " << sh.in << " groups " << sh.groups << " rows " << rows
            << " element " << i << ": " << ref[i] << " vs " << ws[i];
      }
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
