// hc_mix_rows (the mix products of many rows) against kernels::dot_f32's order, bitwise: every
// output and sum of squares, at row counts that fill a block or leave one row alone, hc * dim with
// and without a tail (the lanes' order, the combine and the tail are all the CPU's).
#include <cstring>

#include "backend/cuda/hc_mix_rows.h"
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
  for (const Case& k :
       {Case{4, 65, 5120}, Case{4, 256, 5120}, Case{4, 3, 97}, Case{8, 7, 301}, Case{2, 130, 1}}) {
    const int64_t hc_dim = k.hc * k.dim;
    const int mix = (2 + k.hc) * k.hc;
    ASSERT_TRUE(cuda::hc_mix_rows_supports(mix));
    const Rows x = random_rows(static_cast<size_t>(k.rows * hc_dim), 81);
    const Rows fn = random_rows(static_cast<size_t>(mix * hc_dim), 82, 0.05f);
    Rows raw(static_cast<size_t>(k.rows * mix), -1.0f), ss(static_cast<size_t>(k.rows), -1.0f);
    ASSERT_EQ(
        cuda::hc_mix_rows(x.data(), k.rows, hc_dim, fn.data(), mix, raw.data(), ss.data(), nullptr),
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

}  // namespace
}  // namespace di::backend::testing
