// hc_mix_rows (the mix products of many rows) against kernels::dot_f32's order, bitwise: every
// output and sum of squares, at row counts that pick each rows-per-block tile (2, 4, 8, 16) with
// a partial last block, one to seven output groups (hc 1, 2, 4, 8), hc * dim with and without a
// tail, a last chunk shorter than the staged one, chains shorter than one 16-byte load (the
// lanes' order, the combine and the tail are all the CPU's).
#include <cstring>

#include "backend/cuda/hc_mix_pipe.h"
#include "backend/cuda/hc_mix_rows.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

// kernels::dot_f32's order written out: lane j sums the products j, j + 8, ... (each rounded,
// then added), ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the tail in order. (This
// target is built without the CPU kernels' vector flags, so the header itself is not used.)
float dot_f32_order(const float* a, const float* b, int64_t n) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t full = n / 8 * 8;
  for (int64_t k = 0; k < full; ++k) {
    const float p = a[k] * b[k];
    l[k % 8] = l[k % 8] + p;
  }
  float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  for (int64_t k = full; k < n; ++k) {
    const float p = a[k] * b[k];
    s = s + p;
  }
  return s;
}

TEST_F(CudaOpsTest, HcMixRowsEqualDotF32Bitwise) {
  struct Case {
    int hc;
    int64_t rows, dim;
  };
  for (const Case& k : {Case{4, 65, 5120}, Case{4, 256, 5120}, Case{4, 3, 97}, Case{8, 7, 301},
                        Case{2, 130, 1}, Case{4, 1030, 257}, Case{4, 2050, 640}, Case{4, 4100, 320},
                        Case{8, 300, 64}, Case{1, 70, 13}}) {
    const int64_t hc_dim = k.hc * k.dim;
    const int mix = (2 + k.hc) * k.hc;
    ASSERT_TRUE(cuda::hc_mix_rows_supports(mix));
    const Rows x = random_rows(static_cast<size_t>(k.rows * hc_dim), 81);
    const Rows fn = random_rows(static_cast<size_t>(mix * hc_dim), 82, 0.05f);
    Rows raw(static_cast<size_t>(k.rows * mix), -1.0f), ss(static_cast<size_t>(k.rows), -1.0f);
    ASSERT_EQ(cuda::hc_mix_rows(x.data(), k.rows, hc_dim, fn.data(), mix, raw.data(), ss.data(),
                                false, nullptr),
              cudaSuccess);
    sync();
    size_t differ = 0;
    for (int64_t r = 0; r < k.rows; ++r) {
      const float* xr = x.data() + r * hc_dim;
      for (int o = 0; o < mix; ++o) {
        const float want = dot_f32_order(xr, fn.data() + o * hc_dim, hc_dim);
        differ += std::memcmp(&want, &raw[static_cast<size_t>(r * mix + o)], 4) != 0;
      }
      const float want = dot_f32_order(xr, xr, hc_dim);
      differ += std::memcmp(&want, &ss[static_cast<size_t>(r)], 4) != 0;
    }
    EXPECT_EQ(differ, 0u) << "hc " << k.hc << " rows " << k.rows << " dim " << k.dim;
  }
}

// The form `linear` takes for dense products of few outputs at many rows (the indexer's
// weights_proj, the router): no sums of squares, outputs rounded to bf16 or not, the weights
// bf16-valued (widened), against the CPU order bitwise.
TEST_F(CudaOpsTest, HcMixRowsAsDenseProductEqualsDotF32Bitwise) {
  struct Case {
    int outputs;
    int64_t rows, k;
  };
  for (const Case& c : {Case{32, 65, 5120}, Case{32, 256, 5120}, Case{16, 300, 5120},
                        Case{64, 1030, 2048}, Case{32, 4100, 640}, Case{95, 200, 100}}) {
    const Rows x = random_rows(static_cast<size_t>(c.rows * c.k), 91);
    Rows w = random_rows(static_cast<size_t>(c.outputs * c.k), 92, 0.05f);
    for (float& v : w) v = round_bf16(v);
    for (const bool round : {false, true}) {
      Rows y(static_cast<size_t>(c.rows * c.outputs), -1.0f);
      ASSERT_EQ(cuda::hc_mix_rows(x.data(), c.rows, c.k, w.data(), c.outputs, y.data(), nullptr,
                                  round, nullptr),
                cudaSuccess);
      sync();
      size_t differ = 0;
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int o = 0; o < c.outputs; ++o) {
          float want = dot_f32_order(x.data() + r * c.k, w.data() + o * c.k, c.k);
          if (round) want = round_bf16(want);
          differ += std::memcmp(&want, &y[static_cast<size_t>(r * c.outputs + o)], 4) != 0;
        }
      }
      EXPECT_EQ(differ, 0u) << "outputs " << c.outputs << " rows " << c.rows << " round " << round;
    }
  }
}

// hc_mix_products (few rows: a block per output, warp 0's chains streaming behind the other
// warps' products) and hc_sum_squares, bitwise against the same order: V4.1's 20,480 at 1, 8
// and 64 rows, widths whose last chunk is short or has a scalar remainder, a tail, fewer
// products than one chunk and none at all (hc * dim < 8).
TEST_F(CudaOpsTest, HcMixProductsEqualDotF32Bitwise) {
  struct Case {
    int hc;
    int64_t rows, dim;
  };
  for (const Case& k :
       {Case{4, 1, 5120}, Case{4, 8, 5120}, Case{4, 64, 5120}, Case{4, 3, 97}, Case{4, 2, 2051},
        Case{1, 5, 130}, Case{1, 2, 64}, Case{1, 3, 7}, Case{2, 2, 1}, Case{3, 2, 6000}}) {
    const int64_t hc_dim = k.hc * k.dim;
    const int mix = (2 + k.hc) * k.hc;
    ASSERT_TRUE(cuda::hc_mix_products_fit(hc_dim));
    const Rows x = random_rows(static_cast<size_t>(k.rows * hc_dim), 91);
    const Rows fn = random_rows(static_cast<size_t>(mix * hc_dim), 92, 0.05f);
    Rows raw(static_cast<size_t>(k.rows * mix), -1.0f), ss(static_cast<size_t>(k.rows), -1.0f);
    Rows ss2(static_cast<size_t>(k.rows), -1.0f);
    ASSERT_EQ(cuda::hc_mix_products(x.data(), k.rows, hc_dim, fn.data(), mix, raw.data(), ss.data(),
                                    nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda::hc_sum_squares(x.data(), k.rows, hc_dim, ss2.data(), nullptr), cudaSuccess);
    sync();
    size_t differ = 0;
    for (int64_t r = 0; r < k.rows; ++r) {
      const float* xr = x.data() + r * hc_dim;
      for (int o = 0; o < mix; ++o) {
        const float want = dot_f32_order(xr, fn.data() + o * hc_dim, hc_dim);
        differ += std::memcmp(&want, &raw[static_cast<size_t>(r * mix + o)], 4) != 0;
      }
      const float want = dot_f32_order(xr, xr, hc_dim);
      differ += std::memcmp(&want, &ss[static_cast<size_t>(r)], 4) != 0;
      differ += std::memcmp(&want, &ss2[static_cast<size_t>(r)], 4) != 0;
    }
    EXPECT_EQ(differ, 0u) << "hc " << k.hc << " rows " << k.rows << " dim " << k.dim;
  }
}

// The pipelined few-rows kernel (hc_mix_pipe.cu) at 8 and 16 warps, bitwise against the same
// order and against the staged kernel: V4.1's 20,480 at 1 and 8 rows, widths with a short last
// chunk, a last chain batch of fewer than 16 steps, a tail (hc_dim % 8 == 4), a single chunk,
// fewer than 16 steps, no steps at all, and the widest it takes (64 chunks); the products and
// the sums of squares alone (first == mix, no fn). Misaligned or odd-width operands are refused.
TEST_F(CudaOpsTest, HcMixPipelinedEqualsDotF32Bitwise) {
  struct Case {
    int hc;
    int64_t rows, dim;
  };
  for (const Case& k :
       {Case{4, 1, 5120}, Case{4, 8, 5120}, Case{4, 3, 97}, Case{4, 2, 2051}, Case{3, 2, 6000},
        Case{1, 5, 132}, Case{2, 2, 2}, Case{8, 4, 4096}, Case{4, 7, 1030}, Case{2, 6, 20}}) {
    const int64_t hc_dim = k.hc * k.dim;
    const int mix = (2 + k.hc) * k.hc;
    const Rows x = random_rows(static_cast<size_t>(k.rows * hc_dim), 96);
    const Rows fn = random_rows(static_cast<size_t>(mix * hc_dim), 97, 0.05f);
    ASSERT_TRUE(cuda::hc_mix_pipe_supports(x.data(), k.rows, hc_dim, fn.data()));
    Rows staged(static_cast<size_t>(k.rows * mix), -1.0f);
    Rows staged_ss(static_cast<size_t>(k.rows), -1.0f);
    ASSERT_EQ(cuda::hc_mix_products_staged(x.data(), k.rows, hc_dim, fn.data(), mix, 0,
                                           staged.data(), staged_ss.data(), nullptr),
              cudaSuccess);
    for (int warps : {8, 16}) {
      Rows raw(static_cast<size_t>(k.rows * mix), -1.0f), ss(static_cast<size_t>(k.rows), -1.0f);
      Rows ss2(static_cast<size_t>(k.rows), -1.0f);
      ASSERT_EQ(cuda::hc_mix_products_pipelined(x.data(), k.rows, hc_dim, fn.data(), mix, 0,
                                                raw.data(), ss.data(), warps, nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda::hc_mix_products_pipelined(x.data(), k.rows, hc_dim, nullptr, 1, 1, nullptr,
                                                ss2.data(), warps, nullptr),
                cudaSuccess);
      sync();
      size_t differ = 0;
      for (int64_t r = 0; r < k.rows; ++r) {
        const float* xr = x.data() + r * hc_dim;
        for (int o = 0; o < mix; ++o) {
          const float want = dot_f32_order(xr, fn.data() + o * hc_dim, hc_dim);
          differ += std::memcmp(&want, &raw[static_cast<size_t>(r * mix + o)], 4) != 0;
        }
        const float want = dot_f32_order(xr, xr, hc_dim);
        differ += std::memcmp(&want, &ss[static_cast<size_t>(r)], 4) != 0;
        differ += std::memcmp(&want, &ss2[static_cast<size_t>(r)], 4) != 0;
      }
      differ += std::memcmp(raw.data(), staged.data(), sizeof(float) * raw.size()) != 0;
      differ += std::memcmp(ss.data(), staged_ss.data(), sizeof(float) * ss.size()) != 0;
      EXPECT_EQ(differ, 0u) << "hc " << k.hc << " rows " << k.rows << " dim " << k.dim << " warps "
                            << warps;
    }
  }
  const Rows x = random_rows(2 * 5120 + 4, 98), fn = random_rows(24 * 5120, 99);
  float raw[24], ss[1];
  EXPECT_FALSE(cuda::hc_mix_pipe_supports(x.data() + 1, 1, 5120, fn.data()));
  EXPECT_FALSE(cuda::hc_mix_pipe_supports(x.data(), 1, 5122, fn.data()));
  EXPECT_FALSE(cuda::hc_mix_pipe_supports(x.data(), 1, 8 * 4097, fn.data()));
  EXPECT_EQ(cuda::hc_mix_products_pipelined(x.data() + 1, 1, 5120, fn.data(), 24, 0, raw, ss, 16,
                                            nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cuda::hc_mix_products_pipelined(x.data(), 1, 5120, fn.data(), 24, 0, raw, ss, 12, nullptr),
      cudaErrorInvalidValue);
}

// The mixes' tail by one warp per row (hc <= 4, taken when the sums of squares are given)
// against the block kernel (taken when they are not: it sums them itself in the same order),
// bitwise: both use the same exp, so every coefficient and the zero padding must agree.
TEST_F(CudaOpsTest, HcMixesWarpTailEqualsBlockTailBitwise) {
  for (int hc : {1, 2, 3, 4}) {
    for (int64_t rows : {1, 8, 64}) {
      const int64_t hc_dim = hc * int64_t{1280};
      const int mix = (2 + hc) * hc;
      const Rows x = random_rows(static_cast<size_t>(rows * hc_dim), 93);
      const Rows fn = random_rows(static_cast<size_t>(mix * hc_dim), 94, 0.05f);
      const Rows base = random_rows(static_cast<size_t>(mix), 95, 0.5f);
      const Rows scale = {0.7f, 1.1f, 2.3f};
      Rows raw(static_cast<size_t>(rows * mix)), ss(static_cast<size_t>(rows));
      ManagedVector<HcCoefficients> warp(static_cast<size_t>(rows)), block(warp.size());
      std::memset(warp.data(), 0xff, sizeof(HcCoefficients) * warp.size());
      std::memset(block.data(), 0xff, sizeof(HcCoefficients) * block.size());
      ASSERT_EQ(cuda::hc_mix_products(x.data(), rows, hc_dim, fn.data(), mix, raw.data(), ss.data(),
                                      nullptr),
                cudaSuccess);
      const float* no_sums = nullptr;
      for (const float* sums : {static_cast<const float*>(ss.data()), no_sums}) {
        ASSERT_EQ(
            cuda::hc_mixes(x.data(), rows, hc_dim, sums, raw.data(), scale.data(), base.data(), hc,
                           20, 1e-6f, 1e-6f, sums ? warp.data() : block.data(), nullptr),
            cudaSuccess);
      }
      sync();
      EXPECT_EQ(std::memcmp(warp.data(), block.data(), sizeof(HcCoefficients) * warp.size()), 0)
          << "hc " << hc << " rows " << rows;
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
