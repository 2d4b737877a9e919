// linear() and the quantizers against plain double-precision references built from the format
// definitions (spec §1.9), plus batch and thread invariance of every output row.
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "op_test_util.h"

namespace di::backend {
namespace {

using di::testing::expect_close;
using di::testing::nearest_e2m1;
using di::testing::nearest_e4m3;
using di::testing::poisoned;
using di::testing::pow2_ceil;
using di::testing::random_vector;

struct StoredWeight {
  WeightView view;
  std::vector<uint8_t> data, scale;
  std::vector<double> dense;  // dequantized [out, in]
};

StoredWeight make_weight(WeightFormat f, int64_t out, int64_t in, uint32_t seed) {
  StoredWeight w;
  auto v = random_vector(static_cast<size_t>(out * in), seed, 0.05f, false);
  w.dense.resize(v.size());
  if (f == WeightFormat::kFP8) {
    const int64_t rb = (out + 31) / 32, cb = (in + 31) / 32;
    w.data.resize(static_cast<size_t>(out * in));
    w.scale.resize(static_cast<size_t>(rb * cb));
    for (int64_t b = 0; b < rb; ++b)
      for (int64_t c = 0; c < cb; ++c) {
        double amax = 1e-12;
        for (int64_t r = b * 32; r < std::min(out, b * 32 + 32); ++r)
          for (int64_t k = c * 32; k < std::min(in, c * 32 + 32); ++k)
            amax = std::max(amax, std::fabs(double(v[r * in + k])));
        double s = pow2_ceil(amax / 448);
        w.scale[b * cb + c] = static_cast<uint8_t>(127 + std::lround(std::log2(s)));
        for (int64_t r = b * 32; r < std::min(out, b * 32 + 32); ++r)
          for (int64_t k = c * 32; k < std::min(in, c * 32 + 32); ++k) {
            w.data[r * in + k] = float_to_e4m3(static_cast<float>(v[r * in + k] / s));
            w.dense[r * in + k] = e4m3_to_float(w.data[r * in + k]) * s;
          }
      }
  } else if (f == WeightFormat::kFP4) {
    w.data.assign(static_cast<size_t>(out * in / 2), 0);
    w.scale.resize(static_cast<size_t>(out * in / 32));
    for (int64_t r = 0; r < out; ++r)
      for (int64_t c = 0; c < in / 32; ++c) {
        double amax = 1e-12;
        for (int k = 0; k < 32; ++k)
          amax = std::max(amax, std::fabs(double(v[r * in + c * 32 + k])));
        double s = pow2_ceil(amax / 6);
        w.scale[r * (in / 32) + c] = static_cast<uint8_t>(127 + std::lround(std::log2(s)));
        for (int k = 0; k < 32; ++k) {
          int64_t i = c * 32 + k;
          uint8_t code = float_to_e2m1(static_cast<float>(v[r * in + i] / s));
          w.data[r * (in / 2) + i / 2] |= static_cast<uint8_t>((i & 1) ? code << 4 : code);
          w.dense[r * in + i] = e2m1_to_float(code) * s;
        }
      }
  } else {
    w.data.resize(static_cast<size_t>(out * in * 2));
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = float_to_bf16(v[i]);
      std::memcpy(&w.data[2 * i], &h, 2);
      w.dense[i] = bf16_to_float(h);
    }
  }
  w.view = {f, out, in, w.data.data(), w.scale.empty() ? nullptr : w.scale.data()};
  return w;
}

// Reference: activation fake quantization from the definition, then a double dot product.
std::vector<double> reference_linear(const std::vector<float>& x,
                                     int64_t rows,
                                     const StoredWeight& w,
                                     bool quantize_act) {
  const int64_t in = w.view.in_features, out = w.view.out_features;
  std::vector<double> y(static_cast<size_t>(rows * out));
  std::vector<double> xq(static_cast<size_t>(in));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t b = 0; b < in / 32; ++b) {
      double amax = 1e-4;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(double(x[m * in + b * 32 + k])));
      double s = pow2_ceil(amax * double(1.0f / 448.0f));
      for (int k = 0; k < 32; ++k) {
        double v = x[m * in + b * 32 + k];
        xq[b * 32 + k] = quantize_act ? nearest_e4m3(v / s) * s : v;
      }
    }
    for (int64_t n = 0; n < out; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += xq[k] * w.dense[n * in + k];
      y[m * out + n] = acc;
    }
  }
  return y;
}

class LinearTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(LinearTest, MatchesDequantizedDoubleReference) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  const int64_t rows = 7, in = 96, out = 70;
  const WeightFormat f = GetParam();
  auto w = make_weight(f, out, in, 3);
  auto x = random_vector(static_cast<size_t>(rows * in), 4);
  auto y = poisoned(static_cast<size_t>(rows * out));
  ops.linear(ConstRowsView(x.data(), rows, in), w.view, RowsView{y.data(), rows, out}, true);
  const bool quantized = f == WeightFormat::kFP8 || f == WeightFormat::kFP4;
  // bf16 output: one rounding (2^-8 relative) plus fp32 accumulation.
  expect_close(y, reference_linear(x, rows, w, quantized), 4e-3, 1e-6, "linear");
}

TEST_P(LinearTest, RowsDoNotDependOnBatchOrThreads) {
  const int64_t in = 64, out = 48, rows = 9;
  auto w = make_weight(GetParam(), out, in, 5);
  auto x = random_vector(static_cast<size_t>(rows * in), 6);
  ThreadPool p1(1), p3(3);
  CpuOps one(p1), three(p3);
  std::vector<float> all(static_cast<size_t>(rows * out));
  three.linear(ConstRowsView(x.data(), rows, in), w.view, RowsView{all.data(), rows, out}, true);
  for (int64_t m = 0; m < rows; ++m) {
    std::vector<float> single(static_cast<size_t>(out));
    one.linear(ConstRowsView(x.data() + m * in, 1, in), w.view, RowsView{single.data(), 1, out},
               true);
    ASSERT_EQ(std::memcmp(single.data(), all.data() + m * out, static_cast<size_t>(out) * 4), 0)
        << "row " << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats,
                         LinearTest,
                         ::testing::Values(WeightFormat::kFP8,
                                           WeightFormat::kFP4,
                                           WeightFormat::kBF16));

TEST(Quantizers, Fp8FakeQuantMatchesDefinition) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  auto x = random_vector(4 * 64, 8, 3.0f);
  x[5] = 0;  // an all-small block exercises the 1e-4 amax floor
  auto y = x;
  ops.fake_quant_fp8(RowsView{y.data(), 4, 64}, 32);
  std::vector<double> ref(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    double amax = 1e-4;
    for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(double(x[b * 32 + k])));
    double s = pow2_ceil(amax * double(1.0f / 448.0f));
    for (int k = 0; k < 32; ++k)
      ref[b * 32 + k] = round_bf16(static_cast<float>(nearest_e4m3(x[b * 32 + k] / s) * s));
  }
  expect_close(y, ref, 0, 0, "fake_quant_fp8");
}

TEST(Quantizers, Fp4FakeQuantMatchesDefinition) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  for (Fp4ScaleKind kind : {Fp4ScaleKind::kUe8m0Block32, Fp4ScaleKind::kE4m3Block16}) {
    auto x = random_vector(3 * 64, 9, 2.0f);
    auto y = x;
    ops.fake_quant_fp4(RowsView{y.data(), 3, 64}, kind);
    const int block = kind == Fp4ScaleKind::kE4m3Block16 ? 16 : 32;
    std::vector<double> ref(x.size());
    for (size_t b = 0; b < x.size() / block; ++b) {
      double amax = 0;
      for (int k = 0; k < block; ++k) amax = std::max(amax, std::fabs(double(x[b * block + k])));
      double s =
          block == 16
              ? nearest_e4m3(static_cast<float>(std::max(amax, 6 * std::ldexp(1.0, -9)) / 6.0f))
              : pow2_ceil(std::max(amax, 6 * std::ldexp(1.0, -126)) * double(1.0f / 6.0f));
      for (int k = 0; k < block; ++k) {
        double v = std::clamp(double(static_cast<float>(x[b * block + k] / s)), -6.0, 6.0);
        ref[b * block + k] = round_bf16(static_cast<float>(nearest_e2m1(v) * s));
      }
    }
    expect_close(y, ref, 0, 0, "fake_quant_fp4");
  }
}

}  // namespace
}  // namespace di::backend
