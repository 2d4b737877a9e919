// The small per-token ops that used to fall back to the CPU inside CudaOps: the hyper-connection
// mixes (mix product + Sinkhorn), the MoE router (scores, top-k, weights) and the compressor's
// softmax pooling, against CpuOps on random inputs. Each calls exp (and the router log1p), so
// values are compared nearly bitwise (cuda_test_util.h); expert indices must be identical.
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

struct RouteCase {
  ScoreFunc func;
  WeightFormat gate_format;
  bool norm;
  bool bias;
};

std::string route_case_name(const ::testing::TestParamInfo<RouteCase>& info) {
  static const char* kFuncs[] = {"sqrtsoftplus", "sigmoid", "softmax"};
  static const char* kFormats[] = {"bf16", "f32", "fp8", "fp4"};
  const RouteCase& c = info.param;
  return std::string(kFuncs[static_cast<int>(c.func)]) + "_" +
         kFormats[static_cast<int>(c.gate_format)] + (c.norm ? "_norm" : "") +
         (c.bias ? "_bias" : "");
}

class CudaMoeRoute : public CudaOpsTest, public ::testing::WithParamInterface<RouteCase> {};

TEST_P(CudaMoeRoute, MatchesCpu) {
  const RouteCase c = GetParam();
  const int64_t rows = 70, dim = 256;
  // 160: more experts than the kernel's 128 threads; 256: V4.1's; 600: several per thread.
  for (int n : {160, 256, 600}) {
    RouteParams p;
    p.num_experts = n;
    p.topk = 6;
    p.score_func = c.func;
    p.gate_temp = 1.3f;
    p.norm_topk_prob = c.norm;
    p.route_scale = 2.5f;
    RandomWeight gate = random_weight(c.gate_format, p.num_experts, dim, 41);
    auto x = random_rows(static_cast<size_t>(rows * dim), 42);
    auto bias = random_rows(static_cast<size_t>(p.num_experts), 43, 0.01f);
    const float* b = c.bias ? bias.data() : nullptr;
    std::vector<int32_t> ec(static_cast<size_t>(rows * p.topk)), eg(ec.size(), -7);
    std::vector<float> wc(ec.size()), wg(ec.size(), NAN);
    cpu_.moe_route({x.data(), rows, dim}, gate.view, b, p, ec.data(), wc.data());
    gpu_->moe_route({x.data(), rows, dim}, gate.view, b, p, eg.data(), wg.data());
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    EXPECT_EQ(eg, ec) << n << " experts";
    expect_nearly_bitwise(wg, wc, 0.9, 1e-5, "moe_route weights");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Funcs,
    CudaMoeRoute,
    ::testing::Values(RouteCase{ScoreFunc::kSqrtSoftplus, WeightFormat::kBF16, true, true},
                      RouteCase{ScoreFunc::kSqrtSoftplus, WeightFormat::kFP8, true, false},
                      RouteCase{ScoreFunc::kSigmoid, WeightFormat::kF32, true, true},
                      RouteCase{ScoreFunc::kSoftmax, WeightFormat::kBF16, false, false},
                      RouteCase{ScoreFunc::kSoftmax, WeightFormat::kF32, true, true}),
    route_case_name);

// Exact ties in score + bias go to the lower expert index, in every round of the top-k.
TEST_F(CudaOpsTest, MoeRouteBreaksTiesToTheLowerIndex) {
  const int64_t rows = 5, dim = 64;
  RouteParams p;
  p.num_experts = 200;
  p.topk = 8;
  // Every expert's gate row repeats in blocks of 4 (equal raw scores), and so does the bias.
  RandomWeight gate = random_weight(WeightFormat::kF32, p.num_experts / 4, dim, 61);
  std::vector<float> rows4(static_cast<size_t>(p.num_experts * dim));
  const float* src = reinterpret_cast<const float*>(gate.data.data());
  for (int e = 0; e < p.num_experts; ++e) {
    std::memcpy(rows4.data() + e * dim, src + (e / 4) * dim, sizeof(float) * dim);
  }
  const WeightView w{WeightFormat::kF32, p.num_experts, dim,
                     reinterpret_cast<const uint8_t*>(rows4.data()), nullptr};
  std::vector<float> bias(static_cast<size_t>(p.num_experts));
  for (int e = 0; e < p.num_experts; ++e) bias[static_cast<size_t>(e)] = 0.001f * (e / 4 % 3);
  auto x = random_rows(static_cast<size_t>(rows * dim), 62);
  for (ScoreFunc f : {ScoreFunc::kSqrtSoftplus, ScoreFunc::kSigmoid, ScoreFunc::kSoftmax}) {
    p.score_func = f;
    std::vector<int32_t> ec(static_cast<size_t>(rows * p.topk)), eg(ec.size(), -7);
    std::vector<float> wc(ec.size()), wg(ec.size(), NAN);
    cpu_.moe_route({x.data(), rows, dim}, w, bias.data(), p, ec.data(), wc.data());
    gpu_->moe_route({x.data(), rows, dim}, w, bias.data(), p, eg.data(), wg.data());
    EXPECT_EQ(eg, ec) << "score func " << static_cast<int>(f);
    expect_nearly_bitwise(wg, wc, 0.5, 1e-5, "tied moe_route weights");
  }
}

TEST_F(CudaOpsTest, HcMixesMatchCpuNearlyBitwise) {
  // Few rows take the shared-memory product kernel, many rows dense_tiled; dim 97 leaves a tail
  // of the chains (hc * dim not a multiple of 8), 5120 is V4.1's width.
  struct Case {
    int hc;
    int64_t rows, dim;
  };
  for (const Case& k :
       {Case{1, 64, 97}, Case{4, 64, 97}, Case{4, 65, 97}, Case{4, 3, 5120}, Case{4, 70, 5120}}) {
    const int hc = k.hc;
    const int64_t rows = k.rows, dim = k.dim;
    const int64_t hc_dim = hc * dim;
    const int mix = (2 + hc) * hc;
    auto x = random_rows(static_cast<size_t>(rows * hc_dim), 71);
    auto fn = random_rows(static_cast<size_t>(mix * hc_dim), 72, 0.05f);
    auto base = random_rows(static_cast<size_t>(mix), 73, 0.5f);
    const float scale[3] = {0.7f, 1.1f, 2.3f};
    ManagedVector<HcCoefficients> cc(static_cast<size_t>(rows)), cg(cc.size());
    cpu_.hc_mixes({x.data(), rows, hc_dim}, fn.data(), scale, base.data(), hc, 20, 1e-6f, 1e-6f,
                  cc.data());
    gpu_->hc_mixes({x.data(), rows, hc_dim}, fn.data(), scale, base.data(), hc, 20, 1e-6f, 1e-6f,
                   cg.data());
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    std::vector<float> vc, vg;
    for (int64_t r = 0; r < rows; ++r) {
      const auto& a = cc[static_cast<size_t>(r)];
      const auto& b = cg[static_cast<size_t>(r)];
      for (int i = 0; i < hc; ++i) {
        vc.insert(vc.end(), {a.pre[i], a.post[i]});
        vg.insert(vg.end(), {b.pre[i], b.post[i]});
      }
      vc.insert(vc.end(), a.comb, a.comb + hc * hc);
      vg.insert(vg.end(), b.comb, b.comb + hc * hc);
    }
    expect_nearly_bitwise(vg, vc, 0.95, 1e-4, "hc_mixes");
  }
}

TEST_F(CudaOpsTest, SoftmaxPoolMatchesCpuNearlyBitwise) {
  for (int group : {1, 4, 64}) {
    // Three groups: rows 0.., rows 1.. (overlapping the first) and rows 0.. again.
    const int64_t dim = 515;
    auto kv = random_rows(static_cast<size_t>((group + 1) * dim), 81);
    auto score = random_rows(static_cast<size_t>((group + 1) * dim), 82, 4.0f);
    const std::vector<const float*> kvs = {kv.data(), kv.data() + dim, kv.data()},
                                    scores = {score.data(), score.data() + dim, score.data()};
    Rows oc(static_cast<size_t>(3 * dim)), og(oc.size(), NAN);
    cpu_.softmax_pool(kvs.data(), scores.data(), 3, group, dim, oc.data());
    gpu_->softmax_pool(kvs.data(), scores.data(), 3, group, dim, og.data());
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    expect_nearly_bitwise(og, oc, 0.98, 1e-5, "softmax_pool");
  }
}

}  // namespace
}  // namespace di::backend::testing
