// Row-wise ops (norm, RoPE, hyper-connections, router, SwiGLU, Engram gate, pooling) against plain
// double-precision references written from the spec's formulas.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_ops.h"
#include "op_test_util.h"

namespace di::backend {
namespace {

using di::testing::expect_close;
using di::testing::poisoned;
using di::testing::random_vector;

class RowOps : public ::testing::Test {
 protected:
  ThreadPool pool_{2};
  CpuOps ops_{pool_};
};

// Each row is its token's table row, converted from bf16 (or copied from f32), in every copy.
TEST_F(RowOps, EmbedRowsGathersAndReplicates) {
  const int64_t vocab = 6, dim = 5;
  std::vector<uint16_t> bf(static_cast<size_t>(vocab * dim));
  std::vector<float> f32(bf.size());
  for (size_t i = 0; i < bf.size(); ++i) {
    f32[i] = static_cast<float>(i) * 0.25f - 3.0f;  // exact in bf16
    bf[i] = float_to_bf16(f32[i]);
  }
  const std::vector<int32_t> tokens = {4, 0, 4};
  for (bool use_bf16 : {true, false}) {
    const WeightView table{use_bf16 ? WeightFormat::kBF16 : WeightFormat::kF32, vocab, dim,
                           use_bf16 ? reinterpret_cast<const uint8_t*>(bf.data())
                                    : reinterpret_cast<const uint8_t*>(f32.data()),
                           nullptr};
    std::vector<float> out(3 * 2 * dim, NAN);
    ops_.embed_rows(table, tokens.data(), 2, RowsView{out.data(), 3, 2 * dim});
    for (int64_t r = 0; r < 3; ++r) {
      for (int k = 0; k < 2; ++k) {
        for (int64_t d = 0; d < dim; ++d) {
          EXPECT_EQ(out[static_cast<size_t>(r * 2 * dim + k * dim + d)],
                    f32[static_cast<size_t>(tokens[static_cast<size_t>(r)] * dim + d)])
              << "row " << r << " copy " << k << " dim " << d << (use_bf16 ? " bf16" : " f32");
        }
      }
    }
  }
}

// Engram rows: each value decoded from e4m3 and scaled by its 32-block's ue8m0 exponent, then
// rounded to bf16; checked against values computed by hand from the codes' definitions.
TEST_F(RowOps, GatherFp8RowsDecodesAndScales) {
  const int64_t rows = 3, width = 64;
  std::vector<uint8_t> data(static_cast<size_t>(rows * width)),
      scale(static_cast<size_t>(rows * 2));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<uint8_t>(120 + 3 * i);
  auto e4m3 = [](uint8_t b) -> double {  // e4m3fn by its definition (bias 7, no infinities)
    const int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    return sign ? -mag : mag;
  };
  const Fp8RowTable table{data.data(), scale.data(), rows, width};
  const std::vector<int32_t> index = {2, 0, 2, 1};
  std::vector<float> out(index.size() * width, -1.0f);
  ops_.gather_fp8_rows(table, index.data(), RowsView{out.data(), 4, width});
  for (size_t r = 0; r < index.size(); ++r) {
    for (int64_t d = 0; d < width; ++d) {
      const size_t t = static_cast<size_t>(index[r]);
      const double want = e4m3(data[t * width + static_cast<size_t>(d)]) *
                          std::ldexp(1.0, scale[t * 2 + static_cast<size_t>(d / 32)] - 127);
      const float got = out[r * width + static_cast<size_t>(d)];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << r << "," << d;
      } else {
        // e4m3 times a power of two has 4 significant bits: exact in bf16 within its range.
        EXPECT_EQ(got, static_cast<float>(want)) << "row " << r << " dim " << d;
      }
    }
  }
}

TEST_F(RowOps, RmsNorm) {
  auto x = random_vector(3 * 64, 1, 2.0f);
  auto w = random_vector(64, 2, 1.0f);
  auto y = poisoned(x.size());
  ops_.rms_norm(ConstRowsView(x.data(), 3, 64), w.data(), 1e-6f, RowsView{y.data(), 3, 64});
  std::vector<double> ref(x.size());
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int i = 0; i < 64; ++i) ms += double(x[r * 64 + i]) * x[r * 64 + i];
    ms /= 64;
    for (int i = 0; i < 64; ++i) ref[r * 64 + i] = w[i] * x[r * 64 + i] / std::sqrt(ms + 1e-6);
  }
  expect_close(y, ref, 4e-3, 0, "rms_norm");
}

TEST_F(RowOps, RopeRotatesInterleavedPairsAndInverts) {
  const int H = 2, D = 32, off = 16;
  auto x = random_vector(static_cast<size_t>(3 * H * D), 3);
  RopeTable t;
  for (int i = 0; i < 8; ++i) t.inv_freq.push_back(std::pow(10000.0f, -2.0f * i / 16));
  std::vector<int64_t> pos = {0, 5, 1000};
  auto y = x;
  ops_.rope(RowsView{y.data(), 3, H * D}, H, D, off, pos.data(), t, false);
  std::vector<double> ref(x.begin(), x.end());
  for (int r = 0; r < 3; ++r)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < 8; ++i) {
        double ang = double(static_cast<float>(pos[r]) * t.inv_freq[i]);
        size_t a = static_cast<size_t>((r * H + h) * D + off + 2 * i);
        ref[a] = x[a] * std::cos(ang) - x[a + 1] * std::sin(ang);
        ref[a + 1] = x[a] * std::sin(ang) + x[a + 1] * std::cos(ang);
      }
  expect_close(y, ref, 8e-3, 1e-6, "rope");
  ops_.rope(RowsView{y.data(), 3, H * D}, H, D, off, pos.data(), t, true);
  std::vector<double> orig(x.begin(), x.end());
  expect_close(y, orig, 2e-2, 1e-2, "rope inverse");
}

TEST_F(RowOps, HyperConnectionSinkhornIsDoublyStochastic) {
  const int hc = 4, dim = 32, mix = (2 + hc) * hc;
  auto x = random_vector(static_cast<size_t>(2 * hc * dim), 4);
  auto fn = random_vector(static_cast<size_t>(mix * hc * dim), 5, 0.1f, false);
  std::vector<float> scale = {0.5f, 0.7f, 0.9f};
  auto base = random_vector(mix, 6, 0.3f, false);
  HcCoefficients c[2];
  ops_.hc_mixes(ConstRowsView(x.data(), 2, hc * dim), fn.data(), scale.data(), base.data(), hc, 20,
                1e-6f, 1e-20f, c);
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < hc * dim; ++i) ms += double(x[r * hc * dim + i]) * x[r * hc * dim + i];
    const double rs = 1 / std::sqrt(ms / (hc * dim) + 1e-20);
    std::vector<double> m(mix);
    for (int j = 0; j < mix; ++j) {
      double d = 0;
      for (int i = 0; i < hc * dim; ++i) d += double(x[r * hc * dim + i]) * fn[j * hc * dim + i];
      m[j] = d * rs;
    }
    for (int i = 0; i < hc; ++i) {
      EXPECT_NEAR(c[r].pre[i], 1 / (1 + std::exp(-(m[i] * 0.5 + base[i]))) + 1e-6, 1e-5);
      EXPECT_NEAR(c[r].post[i], 2 / (1 + std::exp(-(m[hc + i] * 0.7 + base[hc + i]))), 1e-5);
    }
    for (int i = 0; i < hc; ++i) {  // after 20 iterations rows and columns sum to ~1
      double row = 0, col = 0;
      for (int j = 0; j < hc; ++j) {
        row += c[r].comb[i * hc + j];
        col += c[r].comb[j * hc + i];
      }
      EXPECT_NEAR(row, 1.0, 1e-3);
      EXPECT_NEAR(col, 1.0, 1e-5);
    }
  }
  // collapse and expand
  std::vector<float> pre = {0.3f, 0.2f, 0.4f, 0.1f, 1, 0, 0, 0};
  auto y = poisoned(2 * dim);
  ops_.hc_collapse(ConstRowsView(x.data(), 2, hc * dim), pre.data(), hc,
                   RowsView{y.data(), 2, dim});
  std::vector<double> ref(2 * dim);
  for (int r = 0; r < 2; ++r)
    for (int d = 0; d < dim; ++d)
      for (int k = 0; k < hc; ++k)
        ref[r * dim + d] += pre[r * hc + k] * x[r * hc * dim + k * dim + d];
  expect_close(y, ref, 4e-3, 1e-6, "hc_collapse");
  auto out = poisoned(2 * hc * dim);
  ops_.hc_expand(ConstRowsView(y.data(), 2, dim), ConstRowsView(x.data(), 2, hc * dim), c, hc,
                 RowsView{out.data(), 2, hc * dim});
  std::vector<double> eref(out.size());
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < hc; ++j)
      for (int d = 0; d < dim; ++d) {
        double v = double(c[r].post[j]) * y[r * dim + d];
        for (int i = 0; i < hc; ++i)
          v += double(c[r].comb[i * hc + j]) * x[r * hc * dim + i * dim + d];
        eref[(r * hc + j) * dim + d] = v;
      }
  expect_close(out, eref, 4e-3, 1e-6, "hc_expand");
  // In place (the block updates its stream so): the same bits as into a separate buffer.
  auto inplace = x;
  ops_.hc_expand(ConstRowsView(y.data(), 2, dim), ConstRowsView(inplace.data(), 2, hc * dim), c, hc,
                 RowsView{inplace.data(), 2, hc * dim});
  ASSERT_EQ(inplace.size(), out.size());
  EXPECT_EQ(std::memcmp(inplace.data(), out.data(), sizeof(float) * out.size()), 0);
}

TEST_F(RowOps, RouterPicksBiasedTopkAndWeightsUnbiasedScores) {
  const int E = 8, dim = 32;
  auto x = random_vector(dim, 7);
  auto g = random_vector(E * dim, 8, 0.3f);
  std::vector<uint8_t> gb(E * dim * 2);
  for (int i = 0; i < E * dim; ++i) {
    uint16_t h = float_to_bf16(g[i]);
    std::memcpy(&gb[2 * i], &h, 2);
  }
  std::vector<float> bias = {0, 0.5f, 0, 0, -0.5f, 0, 0.2f, 0};
  RouteParams p{E, 3, ScoreFunc::kSqrtSoftplus, 1.0f, true, 1.5f};
  int32_t experts[3];
  float weights[3];
  ops_.moe_route(ConstRowsView(x.data(), 1, dim), {WeightFormat::kBF16, E, dim, gb.data(), nullptr},
                 bias.data(), p, experts, weights);
  std::vector<double> s(E);
  for (int e = 0; e < E; ++e) {
    double d = 0;
    for (int i = 0; i < dim; ++i) d += double(x[i]) * g[e * dim + i];
    s[e] = std::sqrt(std::log1p(std::exp(d)));
  }
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return s[a] + bias[a] > s[b] + bias[b]; });
  double sum = s[order[0]] + s[order[1]] + s[order[2]];
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(experts[k], order[k]);
    EXPECT_NEAR(weights[k], 1.5 * s[order[k]] / sum, 1e-5);
  }
}

TEST_F(RowOps, SwigluClampsAndWeights) {
  std::vector<float> g = {-3, 0.2f, 0.9f, 20}, u = {0.3f, -2, 0.1f, 5};
  std::vector<float> w = {0.7f};
  auto out = poisoned(4);
  ops_.swiglu(ConstRowsView(g.data(), 1, 4), ConstRowsView(u.data(), 1, 4), w.data(), 0.5f,
              RowsView{out.data(), 1, 4});
  std::vector<double> ref(4);
  for (int i = 0; i < 4; ++i) {
    double gg = std::min<double>(g[i], 0.5), uu = std::clamp<double>(u[i], -0.5, 0.5);
    ref[i] = 0.7 * gg / (1 + std::exp(-gg)) * uu;
  }
  expect_close(out, ref, 4e-3, 1e-7, "swiglu");
}

TEST_F(RowOps, EngramGateAndSoftmaxPool) {
  const int hc = 2, dim = 32;
  auto x = random_vector(hc * dim, 9);
  auto kv = random_vector((hc + 1) * dim, 10);
  auto qk = random_vector(hc * dim, 11, 1.0f, false);
  auto y = x;
  ops_.engram_gate(RowsView{y.data(), 1, hc * dim}, ConstRowsView(kv.data(), 1, (hc + 1) * dim),
                   qk.data(), hc, 1e-20f);
  std::vector<double> ref(x.size());
  for (int k = 0; k < hc; ++k) {
    double hx = 0, kk = 0, dot = 0;
    for (int d = 0; d < dim; ++d) {
      hx += double(x[k * dim + d]) * x[k * dim + d];
      kk += double(kv[k * dim + d]) * kv[k * dim + d];
      dot += double(x[k * dim + d]) * qk[k * dim + d] * kv[k * dim + d];
    }
    dot = dot / std::sqrt(hx / dim) / std::sqrt(kk / dim) / std::sqrt(double(dim));
    double gate =
        1 / (1 + std::exp(-std::copysign(std::sqrt(std::max(std::fabs(dot), 1e-6)), dot)));
    for (int d = 0; d < dim; ++d) ref[k * dim + d] = x[k * dim + d] + gate * kv[hc * dim + d];
  }
  expect_close(y, ref, 4e-3, 1e-6, "engram_gate");

  auto kvp = random_vector(2 * dim, 12, 1.0f, false), sc = random_vector(2 * dim, 13, 1.0f, false);
  // Two groups through the pointer tables: the rows as given, then the same rows swapped.
  auto swapped = kvp, swapped_sc = sc;
  std::rotate(swapped.begin(), swapped.begin() + dim, swapped.end());
  std::rotate(swapped_sc.begin(), swapped_sc.begin() + dim, swapped_sc.end());
  auto pooled = poisoned(2 * dim);
  const std::vector<const float*> kv_groups = {kvp.data(), swapped.data()},
                                  score_groups = {sc.data(), swapped_sc.data()};
  ops_.softmax_pool(kv_groups.data(), score_groups.data(), 2, 2, dim, pooled.data());
  std::vector<double> pref(2 * dim);
  for (int d = 0; d < dim; ++d) {
    double a = std::exp(double(sc[d])), b = std::exp(double(sc[dim + d]));
    pref[d] = pref[dim + d] = (kvp[d] * a + kvp[dim + d] * b) / (a + b);
  }
  expect_close(pooled, pref, 1e-5, 1e-6, "softmax_pool");
}

}  // namespace
}  // namespace di::backend
