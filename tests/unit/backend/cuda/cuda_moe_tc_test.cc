// The routed experts on the tensor path (moe_grouped_tc.cu) through CudaOps::fused_moe: the same
// routing as the CPU, outputs within the tensor GEMM tests' tolerance of model/moe.cc's loop with
// CpuOps, and batch invariance: a token alone gives the bits it gets in a call of 1,500 tokens
// (which runs the wgmma kernels over 128-row units where the single token runs mma.sync over
// 8-row units). Skips without a device.
#include <cmath>

#include "cuda_moe_ref.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

class CudaMoeTensorTest : public CudaOpsTest {
 protected:
  CudaOptions options() const override {
    CudaOptions o = CudaOpsTest::options();
    o.gemm = CudaGemm::kTensor;
    return o;
  }
};

TEST_F(CudaMoeTensorTest, FusedMoeIsCloseToCpuAndBatchInvariant) {
  const MoeCase c{1500, 16, 4, 256, 384, 10.0f};
  RandomWeight gate = random_weight(WeightFormat::kBF16, c.experts, c.dim, 91);
  const auto bias = host_rows(static_cast<size_t>(c.experts), 92, 0.01f);
  RouteParams p;
  p.num_experts = c.experts;
  p.topk = c.topk;
  p.route_scale = 1.5f;
  const auto x = host_rows(static_cast<size_t>(c.tokens * c.dim), 93);
  const auto shared = host_rows(x.size(), 94);
  std::vector<int32_t> ec(static_cast<size_t>(c.tokens * c.topk)), eg(ec.size(), -1);
  std::vector<float> wc(ec.size()), wg(ec.size(), NAN);
  cpu_.moe_route({x.data(), c.tokens, c.dim}, gate.view, bias.data(), p, ec.data(), wc.data());
  std::vector<RandomWeight> w1, w3, w2;
  std::vector<WeightView> v1, v3, v2;
  for (int e = 0; e < c.experts; ++e) {
    w1.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 300 + 3 * e));
    w3.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 301 + 3 * e));
    w2.push_back(random_weight(WeightFormat::kFP4, c.dim, c.inter, 302 + 3 * e));
  }
  for (int e = 0; e < c.experts; ++e) {
    v1.push_back(w1[static_cast<size_t>(e)].view);
    v3.push_back(w3[static_cast<size_t>(e)].view);
    v2.push_back(w2[static_cast<size_t>(e)].view);
  }
  const MoeExpertViews views{v1, v3, v2};
  const auto cpu = cpu_moe(cpu_, c, x, ec, wc, w1, w3, w2, shared);

  const Rows xd(x.begin(), x.end()), sd(shared.begin(), shared.end());
  Rows gpu(cpu.size(), NAN);
  ASSERT_TRUE(gpu_->fused_moe({xd.data(), c.tokens, c.dim}, gate.view, bias.data(), p, views,
                              c.limit, {sd.data(), c.tokens, c.dim}, {gpu.data(), c.tokens, c.dim},
                              eg.data(), wg.data()));
  sync();
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  EXPECT_EQ(eg, ec);
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_FALSE(std::isnan(gpu[i])) << "element " << i;
  const double rel = relative_error(gpu, cpu);
  std::printf("fused_moe tensor path: relative L2 error %.3g vs the CPU\n", rel);
  EXPECT_LT(rel, 1e-2);

  for (int64_t t : {int64_t{0}, int64_t{737}, int64_t{1499}}) {
    Rows one(static_cast<size_t>(c.dim), NAN);
    ASSERT_TRUE(gpu_->fused_moe({xd.data() + t * c.dim, 1, c.dim}, gate.view, bias.data(), p, views,
                                c.limit, {sd.data() + t * c.dim, 1, c.dim}, {one.data(), 1, c.dim},
                                nullptr, nullptr));
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    for (int64_t d = 0; d < c.dim; ++d) {
      ASSERT_EQ(float_bits(one[static_cast<size_t>(d)]),
                float_bits(gpu[static_cast<size_t>(t * c.dim + d)]))
          << "token " << t << " output " << d;
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
