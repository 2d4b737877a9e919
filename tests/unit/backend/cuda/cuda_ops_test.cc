// CudaOps against CpuOps on random inputs: GEMMs, quantizers and row-wise ops. Bitwise where the
// backend contract (docs/design/2026-11-29-cuda-backend.md) demands it; ops that call exp / sin /
// cos are compared near-bitwise (see cuda_test_util.h).
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

struct LinearCase {
  WeightFormat format;
  int64_t rows, out, in;
  bool round;
};

std::string linear_case_name(const ::testing::TestParamInfo<LinearCase>& info) {
  static const char* kNames[] = {"bf16", "f32", "fp8", "fp4"};
  const LinearCase& c = info.param;
  return std::string(kNames[static_cast<int>(c.format)]) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.out) + "x" + std::to_string(c.in);
}

class CudaLinear : public CudaOpsTest, public ::testing::WithParamInterface<LinearCase> {};

TEST_P(CudaLinear, MatchesCpuBitwise) {
  const LinearCase c = GetParam();
  RandomWeight w = random_weight(c.format, c.out, c.in, 7);
  auto x = random_rows(static_cast<size_t>(c.rows * c.in), 11);
  Rows cpu(static_cast<size_t>(c.rows * c.out)), gpu(cpu.size(), NAN);
  cpu_.linear({x.data(), c.rows, c.in}, w.view, {cpu.data(), c.rows, c.out}, c.round);
  gpu_->linear({x.data(), c.rows, c.in}, w.view, {gpu.data(), c.rows, c.out}, c.round);
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  expect_bitwise(gpu, cpu, "linear");
}

INSTANTIATE_TEST_SUITE_P(Shapes,
                         CudaLinear,
                         ::testing::Values(LinearCase{WeightFormat::kFP8, 1, 96, 256, true},
                                           LinearCase{WeightFormat::kFP8, 5, 100, 5120, true},
                                           LinearCase{WeightFormat::kFP8, 16, 64, 96, true},
                                           LinearCase{WeightFormat::kFP8, 45, 130, 320, true},
                                           LinearCase{WeightFormat::kFP8, 70, 130, 320, true},
                                           LinearCase{WeightFormat::kFP4, 3, 64, 256, true},
                                           LinearCase{WeightFormat::kFP4, 40, 72, 512, true},
                                           LinearCase{WeightFormat::kBF16, 3, 50, 131, true},
                                           LinearCase{WeightFormat::kF32, 2, 33, 64, false},
                                           // dense_staged (< 2K outputs, K % 8 == 0)
                                           LinearCase{WeightFormat::kBF16, 1, 300, 5120, true},
                                           LinearCase{WeightFormat::kBF16, 8, 64, 1024, false},
                                           LinearCase{WeightFormat::kBF16, 2, 40, 136, true},
                                           LinearCase{WeightFormat::kF32, 3, 20, 72, false},
                                           // ... and more rows of few outputs (rows x out <=
                                           // 8192: the router's shape at batch 64)
                                           LinearCase{WeightFormat::kBF16, 64, 16, 5120, false},
                                           LinearCase{WeightFormat::kF32, 100, 40, 256, true},
                                           // dense_gemv (>= 16K outputs, K % 32 == 0, <= 8
                                           // rows; 7 = 4 + 3)
                                           LinearCase{WeightFormat::kBF16, 7, 16400, 256, true},
                                           LinearCase{WeightFormat::kF32, 2, 16384, 96, false}),
                         linear_case_name);

// The grouped projection (one GEMV launch for every group on the device) against the CPU's
// per-group default, bitwise: V4.1's wo_a shape scaled down, a tail-free K, 1-8 rows.
TEST_F(CudaOpsTest, GroupedLinearMatchesCpuBitwise) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kF32}) {
    // 8 x 96 outputs take dense_gemm's grouped kernel, 8 x 2048 the GEMV's.
    for (auto [rows, out] :
         {std::pair<int64_t, int64_t>{1, 96}, {3, 96}, {9, 96}, {1, 2048}, {5, 2048}}) {
      const int groups = 8;
      const int64_t in = 256;
      RandomWeight w = random_weight(f, groups * out, in, 9);
      auto x = random_rows(static_cast<size_t>(rows * groups * in), 10);
      Rows cpu(static_cast<size_t>(rows * groups * out)), gpu(cpu.size(), NAN);
      cpu_.grouped_linear({x.data(), rows, groups * in}, w.view, groups,
                          {cpu.data(), rows, groups * out}, true);
      gpu_->grouped_linear({x.data(), rows, groups * in}, w.view, groups,
                           {gpu.data(), rows, groups * out}, true);
      ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
      expect_bitwise(gpu, cpu, "grouped_linear");
    }
  }
}

// A row's output does not depend on the batch it is computed in, nor on which kernel (decode for
// one row, tiled for 70) the batch size selects.
TEST_F(CudaOpsTest, LinearIsBatchInvariant) {
  RandomWeight w = random_weight(WeightFormat::kFP8, 160, 384, 3);
  const int64_t rows = 70;  // more than the decode kernel takes: the tiled kernel
  auto x = random_rows(static_cast<size_t>(rows * 384), 5);
  Rows all(static_cast<size_t>(rows * 160)), one(160);
  gpu_->linear({x.data(), rows, 384}, w.view, {all.data(), rows, 160}, true);
  for (int64_t r = 0; r < rows; r += 13) {
    gpu_->linear({x.data() + r * 384, 1, 384}, w.view, {one.data(), 1, 160}, true);
    sync();
    expect_bitwise(one, Rows(all.begin() + r * 160, all.begin() + (r + 1) * 160),
                   "row alone vs in batch");
  }
}

TEST_F(CudaOpsTest, FakeQuantMatchesCpuBitwise) {
  for (int block : {32, 64, 128}) {
    auto x = random_rows(6 * 512, 21, 3.0f);
    x[7] = 1e-7f;  // tiny blocks hit the amax floor
    auto cpu = x, gpu = x;
    cpu_.fake_quant_fp8({cpu.data(), 6, 512}, block);
    gpu_->fake_quant_fp8({gpu.data(), 6, 512}, block);
    expect_bitwise(gpu, cpu, "fake_quant_fp8");
  }
  for (Fp4ScaleKind kind : {Fp4ScaleKind::kUe8m0Block32, Fp4ScaleKind::kE4m3Block16}) {
    auto x = random_rows(5 * 256, 22, 0.7f);
    auto cpu = x, gpu = x;
    cpu_.fake_quant_fp4({cpu.data(), 5, 256}, kind);
    gpu_->fake_quant_fp4({gpu.data(), 5, 256}, kind);
    expect_bitwise(gpu, cpu, "fake_quant_fp4");
  }
  // An odd number of 16-blocks: the last warp's upper half has no block (a lane per element).
  auto x = random_rows(3 * 48, 23, 0.7f);
  auto cpu = x, gpu = x;
  cpu_.fake_quant_fp4({cpu.data(), 3, 48}, Fp4ScaleKind::kE4m3Block16);
  gpu_->fake_quant_fp4({gpu.data(), 3, 48}, Fp4ScaleKind::kE4m3Block16);
  expect_bitwise(gpu, cpu, "fake_quant_fp4 odd blocks");
}

TEST_F(CudaOpsTest, RmsNormAndHyperConnectionsMatchCpuBitwise) {
  const int64_t rows = 7;
  // 5123: a tail past the 8-lane chains (unaligned rows); 5120, 1536, 1280, 512: V4.1's widths;
  // 1283: a tail after a short chain; 7680: the widest row held in registers (15 values a
  // thread), 7679: the same with a tail; 8192, 9001: too wide to hold, the chains read global
  // memory; 130: chains of 16 steps and a scalar one; 8: one step, no tail; 5: no chain, only the
  // tail. 1 and 64 rows: the decode step's batch 1 and a batch filling more blocks than one per
  // row wave.
  for (int64_t n : {int64_t{1}, rows, int64_t{64}}) {
    for (int64_t cols : {5123, 5120, 1536, 1280, 1283, 512, 7680, 7679, 8192, 130, 9001, 8, 5}) {
      if (n != rows && cols != 5120 && cols != 1280 && cols != 512) continue;
      auto x = random_rows(static_cast<size_t>(n * cols), 31);
      auto w = random_rows(static_cast<size_t>(cols), 32);
      Rows cpu(x.size()), gpu(x.size());
      cpu_.rms_norm({x.data(), n, cols}, w.data(), 1e-6f, {cpu.data(), n, cols});
      gpu_->rms_norm({x.data(), n, cols}, w.data(), 1e-6f, {gpu.data(), n, cols});
      expect_bitwise(gpu, cpu, "rms_norm");
    }
  }

  // 96 and 5120: whole float4s (the four-column kernels); 98: the one-value kernels; hc 1-4.
  for (const int hc : {4, 2, 1}) {
    for (const int64_t dim : {int64_t{96}, int64_t{98}, int64_t{5120}}) {
      const std::string what = "hc " + std::to_string(hc) + ", dim " + std::to_string(dim);
      auto res = random_rows(static_cast<size_t>(rows * hc * dim), 33);
      auto pre = random_rows(static_cast<size_t>(rows * hc), 34);
      Rows yc(static_cast<size_t>(rows * dim)), yg(yc.size());
      cpu_.hc_collapse({res.data(), rows, hc * dim}, pre.data(), hc, {yc.data(), rows, dim});
      gpu_->hc_collapse({res.data(), rows, hc * dim}, pre.data(), hc, {yg.data(), rows, dim});
      expect_bitwise(yg, yc, ("hc_collapse, " + what).c_str());

      ManagedVector<HcCoefficients> coeff(static_cast<size_t>(rows));
      std::mt19937 rng(35);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (auto& c : coeff) {
        for (float& v : c.post) v = u(rng);
        for (float& v : c.comb) v = u(rng);
      }
      Rows oc(res.size()), og(res.size());
      cpu_.hc_expand({yc.data(), rows, dim}, {res.data(), rows, hc * dim}, coeff.data(), hc,
                     {oc.data(), rows, hc * dim});
      gpu_->hc_expand({yc.data(), rows, dim}, {res.data(), rows, hc * dim}, coeff.data(), hc,
                      {og.data(), rows, hc * dim});
      expect_bitwise(og, oc, ("hc_expand, " + what).c_str());
      // In place (the block's update of its stream), on both backends.
      Rows ic(res.begin(), res.end()), ig(res.begin(), res.end());
      cpu_.hc_expand({yc.data(), rows, dim}, {ic.data(), rows, hc * dim}, coeff.data(), hc,
                     {ic.data(), rows, hc * dim});
      gpu_->hc_expand({yc.data(), rows, dim}, {ig.data(), rows, hc * dim}, coeff.data(), hc,
                      {ig.data(), rows, hc * dim});
      expect_bitwise(ic, oc, ("hc_expand in place (cpu), " + what).c_str());
      expect_bitwise(ig, oc, ("hc_expand in place, " + what).c_str());
    }
  }
}

TEST_F(CudaOpsTest, TranscendentalOpsMatchCpuNearlyBitwise) {
  const int64_t rows = 6, cols = 512;
  auto g = random_rows(static_cast<size_t>(rows * cols), 51, 3.0f);
  auto u = random_rows(static_cast<size_t>(rows * cols), 52, 3.0f);
  auto rw = random_rows(static_cast<size_t>(rows), 53);
  Rows sc(g.size()), sg(g.size());
  cpu_.swiglu({g.data(), rows, cols}, {u.data(), rows, cols}, rw.data(), 7.0f,
              {sc.data(), rows, cols});
  gpu_->swiglu({g.data(), rows, cols}, {u.data(), rows, cols}, rw.data(), 7.0f,
               {sg.data(), rows, cols});
  expect_nearly_bitwise(sg, sc, 0.999, 1.0 / 128, "swiglu");

  RopeTable table;
  for (int i = 0; i < 32; ++i) table.inv_freq.push_back(std::pow(10000.0f, -i / 32.0f));
  std::vector<int64_t> pos = {0, 1, 17, 4095, 65536, 1000003};
  for (bool inverse : {false, true}) {
    auto rc = g, rg = g;
    cpu_.rope({rc.data(), rows, cols}, 4, 128, 64, pos.data(), table, inverse);
    gpu_->rope({rg.data(), rows, cols}, 4, 128, 64, pos.data(), table, inverse);
    expect_nearly_bitwise(rg, rc, 0.999, 1.0 / 128, "rope");
  }

  const int hc = 4;
  // 1003: past the lanes' batched loads, and a tail; 5120: V4.1's; 8000: too wide to hold in
  // registers (the staged kernel).
  for (int64_t dim : {128, 1003, 5120, 8000}) {
    auto x = random_rows(static_cast<size_t>(rows * hc * dim), 54);
    auto kv = random_rows(static_cast<size_t>(rows * (hc + 1) * dim), 55);
    auto qk = random_rows(static_cast<size_t>(hc * dim), 56);
    auto ec = x, eg = x;
    cpu_.engram_gate({ec.data(), rows, hc * dim}, {kv.data(), rows, (hc + 1) * dim}, qk.data(), hc,
                     1e-6f);
    gpu_->engram_gate({eg.data(), rows, hc * dim}, {kv.data(), rows, (hc + 1) * dim}, qk.data(), hc,
                      1e-6f);
    expect_nearly_bitwise(eg, ec, 0.999, 1.0 / 128, "engram_gate");
  }
}

}  // namespace
}  // namespace di::backend::testing
