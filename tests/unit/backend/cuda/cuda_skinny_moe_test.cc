// The decode kernels against the CPU backend: the weight-streaming skinny GEMM (every tile
// variant, bitwise) and the device-side routed experts + combine (model/moe.cc's loop with
// CpuOps; nearly bitwise: swiglu's exp, see moe_grouped.h).
#include <algorithm>
#include <numeric>

#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_grouped.h"
#include "cuda_moe_ref.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

// Device copies freed at scope exit.
struct DeviceMem {
  std::vector<void*> ptrs;
  ~DeviceMem() {
    for (void* p : ptrs) (void)cudaFree(p);
  }
  template <class T>
  T* alloc(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, sizeof(T) * std::max<size_t>(n, 1)), cudaSuccess);
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  T* upload(const std::vector<T>& h) {
    T* d = alloc<T>(h.size());
    EXPECT_EQ(cudaMemcpy(d, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
};

template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

struct SkinnyCase {
  WeightFormat format;
  int64_t rows, out, in;
};

class CudaSkinny : public CudaOpsTest, public ::testing::WithParamInterface<SkinnyCase> {};

TEST_P(CudaSkinny, EveryVariantMatchesCpuBitwise) {
  const SkinnyCase c = GetParam();
  RandomWeight w = random_weight(c.format, c.out, c.in, 17);
  auto x = host_rows(static_cast<size_t>(c.rows * c.in), 19);
  std::vector<float> cpu(static_cast<size_t>(c.rows * c.out));
  cpu_.linear({x.data(), c.rows, c.in}, w.view, {cpu.data(), c.rows, c.out}, true);
  DeviceMem m;
  const cuda::DeviceWeight dw{c.format, c.out, c.in, m.upload(w.data), m.upload(w.scale)};
  ASSERT_TRUE(cuda::skinny_gemm_supports(c.rows, dw));
  const float* dx = m.upload(x);
  float* q = m.alloc<float>(x.size());
  float* sc = m.alloc<float>(x.size() / 32);
  float* y = m.alloc<float>(cpu.size());
  ASSERT_EQ(cuda::quantize_fp8(dx, c.rows, c.in, q, sc, nullptr), cudaSuccess);
  for (int v = 0; v < cuda::kSkinnyVariants; ++v) {
    ASSERT_EQ(cudaMemset(y, 0xff, cpu.size() * sizeof(float)), cudaSuccess);  // NaN poison
    ASSERT_EQ(cuda::skinny_gemm_variant(v, q, sc, c.rows, dw, y, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::string what = "skinny variant " + std::to_string(v);
    expect_bitwise(download(y, cpu.size()), cpu, what.c_str());
  }
}

std::string skinny_case_name(const ::testing::TestParamInfo<SkinnyCase>& info) {
  const SkinnyCase& c = info.param;
  return std::string(c.format == WeightFormat::kFP8 ? "fp8_" : "fp4_") + std::to_string(c.rows) +
         "x" + std::to_string(c.out) + "x" + std::to_string(c.in);
}

// Column counts not a multiple of any tile, K with a partial last chunk, rows needing passes,
// CTAs looping over several tiles.
INSTANTIATE_TEST_SUITE_P(Shapes,
                         CudaSkinny,
                         ::testing::Values(SkinnyCase{WeightFormat::kFP8, 1, 96, 256},
                                           SkinnyCase{WeightFormat::kFP8, 3, 100, 1152},
                                           SkinnyCase{WeightFormat::kFP8, 8, 72, 5120},
                                           SkinnyCase{WeightFormat::kFP8, 13, 40, 384},
                                           SkinnyCase{WeightFormat::kFP8, 64, 33, 128},
                                           SkinnyCase{WeightFormat::kFP4, 1, 130, 2304},
                                           SkinnyCase{WeightFormat::kFP4, 6, 64, 640},
                                           SkinnyCase{WeightFormat::kFP4, 16, 200, 1152},
                                           // more column tiles than resident CTAs
                                           SkinnyCase{WeightFormat::kFP8, 2, 9000, 256},
                                           SkinnyCase{WeightFormat::kFP4, 11, 4000, 384}),
                         skinny_case_name);

class CudaMoe : public CudaOpsTest, public ::testing::WithParamInterface<MoeCase> {};

TEST_P(CudaMoe, RoutedExpertsAndCombineMatchCpu) {
  const MoeCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.tokens * 131 + c.experts));
  auto x = host_rows(static_cast<size_t>(c.tokens * c.dim), 23);
  auto shared = host_rows(x.size(), 29);
  std::vector<int32_t> experts;
  std::vector<float> weights;
  std::uniform_real_distribution<float> wd(0.05f, 0.6f);
  for (int64_t t = 0; t < c.tokens; ++t) {  // topk distinct experts per token, any order
    std::vector<int32_t> ids(static_cast<size_t>(c.experts));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int k = 0; k < c.topk; ++k) {
      experts.push_back(ids[static_cast<size_t>(k)]);
      weights.push_back(wd(rng));
    }
  }
  std::vector<RandomWeight> w1, w3, w2;
  for (int e = 0; e < c.experts; ++e) {
    w1.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 100 + 3 * e));
    w3.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 101 + 3 * e));
    w2.push_back(random_weight(WeightFormat::kFP4, c.dim, c.inter, 102 + 3 * e));
  }
  const auto cpu = cpu_moe(cpu_, c, x, experts, weights, w1, w3, w2, shared);

  DeviceMem m;
  auto pointers = [&](const std::vector<RandomWeight>& ws, cuda::ExpertMatrices* out) {
    std::vector<const uint8_t*> data, scale;
    for (const auto& w : ws) {
      data.push_back(m.upload(w.data));
      scale.push_back(m.upload(w.scale));
    }
    out->data = m.upload(data);
    out->scale = m.upload(scale);
  };
  cuda::MoeRoutedArgs a;
  a.x = m.upload(x);
  a.tokens = c.tokens;
  a.dim = c.dim;
  a.inter = c.inter;
  a.experts = m.upload(experts);
  a.weights = m.upload(weights);
  a.topk = c.topk;
  a.num_experts = c.experts;
  pointers(w1, &a.w1);
  pointers(w3, &a.w3);
  pointers(w2, &a.w2);
  a.swiglu_limit = c.limit;
  a.shared = m.upload(shared);
  a.out = m.alloc<float>(cpu.size());
  ASSERT_TRUE(cuda::moe_routed_supports(a));
  void* scratch =
      m.alloc<uint8_t>(cuda::moe_routed_scratch_bytes(c.tokens, c.topk, c.experts, c.dim, c.inter));
  std::vector<float> first;
  for (int v = -1; v < cuda::kMoeVariants; ++v) {
    a.tile_variant = v;
    ASSERT_EQ(cudaMemset(a.out, 0xff, cpu.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cuda::moe_routed(a, scratch, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto gpu = download(a.out, cpu.size());
    if (v < 0) {
      // The only difference allowed is swiglu's exp in the last bit (then carried through w2).
      size_t equal = 0;
      double max_abs = 0, max_cpu = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        ASSERT_FALSE(std::isnan(gpu[i])) << "element " << i;
        equal += float_bits(gpu[i]) == float_bits(cpu[i]);
        max_abs = std::max(max_abs, static_cast<double>(std::fabs(gpu[i] - cpu[i])));
        max_cpu = std::max(max_cpu, static_cast<double>(std::fabs(cpu[i])));
      }
      EXPECT_GE(static_cast<double>(equal), 0.97 * static_cast<double>(cpu.size()))
          << equal << " of " << cpu.size() << " bitwise equal";
      EXPECT_LE(max_abs, 1e-2 * max_cpu);
      first = gpu;
    } else {
      expect_bitwise(gpu, first, "tile variants agree");
    }
  }
  // The tensor path (moe_grouped_tc.cu): within the tensor GEMM tests' tolerance of the CPU, every
  // output written, all row-per-unit variants bitwise equal.
  a.tensor_cores = true;
  for (int v = -1; v < cuda::kMoeTcVariants; ++v) {
    a.tile_variant = v;
    ASSERT_EQ(cudaMemset(a.out, 0xff, cpu.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cuda::moe_routed(a, scratch, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto gpu = download(a.out, cpu.size());
    if (v < 0) {
      for (size_t i = 0; i < cpu.size(); ++i) ASSERT_FALSE(std::isnan(gpu[i])) << "element " << i;
      const double rel = relative_error(gpu, cpu);
      std::printf("moe tensor path (%lld tokens, %d experts): relative L2 error %.3g\n",
                  static_cast<long long>(c.tokens), c.experts, rel);
      EXPECT_LT(rel, 1e-2);
      first = gpu;
    } else {
      expect_bitwise(gpu, first, "tensor-core row variants agree");
    }
  }
}

// CudaOps::fused_moe (router, experts and combine without leaving the device) against CpuOps'
// moe_route and model/moe.cc's loop. The router's exp/log1p and swiglu's exp may differ in the
// last bit (device_numeric.cuh), so the outputs are compared near-bitwise; the experts exactly.
TEST_P(CudaMoe, FusedThroughCudaOpsMatchesCpu) {
  const MoeCase c = GetParam();
  RandomWeight gate = random_weight(WeightFormat::kBF16, c.experts, c.dim, 77);
  const auto bias = host_rows(static_cast<size_t>(c.experts), 78, 0.01f);
  RouteParams p;
  p.num_experts = c.experts;
  p.topk = c.topk;
  p.route_scale = 1.5f;
  const auto x = host_rows(static_cast<size_t>(c.tokens * c.dim), 31);
  const auto shared = host_rows(x.size(), 37);
  std::vector<int32_t> ec(static_cast<size_t>(c.tokens * c.topk)), eg(ec.size(), -1);
  std::vector<float> wc(ec.size()), wg(ec.size(), NAN);
  cpu_.moe_route({x.data(), c.tokens, c.dim}, gate.view, bias.data(), p, ec.data(), wc.data());
  std::vector<RandomWeight> w1, w3, w2;
  std::vector<WeightView> v1, v3, v2;
  for (int e = 0; e < c.experts; ++e) {
    w1.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 200 + 3 * e));
    w3.push_back(random_weight(WeightFormat::kFP4, c.inter, c.dim, 201 + 3 * e));
    w2.push_back(random_weight(WeightFormat::kFP4, c.dim, c.inter, 202 + 3 * e));
  }
  for (int e = 0; e < c.experts; ++e) {
    v1.push_back(w1[static_cast<size_t>(e)].view);
    v3.push_back(w3[static_cast<size_t>(e)].view);
    v2.push_back(w2[static_cast<size_t>(e)].view);
  }
  const auto cpu = cpu_moe(cpu_, c, x, ec, wc, w1, w3, w2, shared);

  const Rows xd(x.begin(), x.end()), sd(shared.begin(), shared.end());
  Rows gpu(cpu.size(), NAN);
  ASSERT_TRUE(gpu_->fused_moe({xd.data(), c.tokens, c.dim}, gate.view, bias.data(), p,
                              MoeExpertViews{v1, v3, v2}, c.limit, {sd.data(), c.tokens, c.dim},
                              {gpu.data(), c.tokens, c.dim}, eg.data(), wg.data()));
  sync();
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  EXPECT_EQ(eg, ec);
  expect_nearly_bitwise(wg, wc, 0.5, 1e-5, "fused_moe routing weights");
  size_t equal = 0;
  double max_abs = 0, max_cpu = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_FALSE(std::isnan(gpu[i])) << "element " << i;
    equal += float_bits(gpu[i]) == float_bits(cpu[i]);
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(gpu[i] - cpu[i])));
    max_cpu = std::max(max_cpu, static_cast<double>(std::fabs(cpu[i])));
  }
  EXPECT_GE(static_cast<double>(equal), 0.9 * static_cast<double>(cpu.size()))
      << equal << " of " << cpu.size() << " bitwise equal";
  EXPECT_LE(max_abs, 1e-2 * max_cpu);
  // Unsupported shapes (inter not a multiple of 128) leave the work to the model's loop.
  std::vector<WeightView> narrow(v1.begin(), v1.end());
  for (auto& w : narrow) w.out_features = 64;
  EXPECT_FALSE(gpu_->fused_moe(
      {xd.data(), c.tokens, c.dim}, gate.view, bias.data(), p, MoeExpertViews{narrow, narrow, v2},
      c.limit, {sd.data(), c.tokens, c.dim}, {gpu.data(), c.tokens, c.dim}, nullptr, nullptr));
}

std::string moe_case_name(const ::testing::TestParamInfo<MoeCase>& info) {
  const MoeCase& c = info.param;
  std::string name = "t";  // (appended piecewise: GCC 12 warns falsely on "t" + string)
  name += std::to_string(c.tokens);
  name += "_e" + std::to_string(c.experts);
  name += "_k" + std::to_string(c.topk);
  return name;
}

// One token; heavy collisions (several units per expert); 384 experts (the plan's scan across
// warps); three experts for 33 tokens (five units each); 1,024 experts with 300 tokens (more
// items than one CTA's table holds at 8 columns: the grouped GEMMs launch more CTAs than fit);
// 375 rows per expert; decode sizes over K of several ring turns. Every case runs every tensor
// variant, the wgmma ones (6, 7) and the decode products (10, 11) included:
// experts without rows, partial 128-row units, K of one stage (dim 128).
INSTANTIATE_TEST_SUITE_P(Shapes,
                         CudaMoe,
                         ::testing::Values(MoeCase{1, 16, 4, 256, 128, 10.0f},
                                           MoeCase{5, 8, 3, 384, 256, 0.5f},
                                           MoeCase{40, 384, 6, 256, 256, 10.0f},
                                           MoeCase{33, 3, 2, 128, 384, 10.0f},
                                           MoeCase{300, 1024, 4, 256, 128, 10.0f},
                                           // decode sizes with K of 8 stages (the
                                           // decode product's ring wraps; one- and two-row
                                           // units)
                                           MoeCase{1, 16, 5, 1024, 384, 10.0f},
                                           MoeCase{3, 4, 2, 1024, 384, 10.0f},
                                           // many rows per expert (the tensor path's pick is
                                           // the wgmma kernel): 2-3 units of 128 rows each,
                                           // the last ones partial
                                           MoeCase{1000, 8, 3, 256, 384, 10.0f}),
                         moe_case_name);

}  // namespace
}  // namespace di::backend::testing
