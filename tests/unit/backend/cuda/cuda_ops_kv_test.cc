// CudaOps' KV-cache ops against CpuOps: write_kv stores the same bytes (any head_dim, both
// formats), kv_attention is bitwise on the exact path (the golden mini shape, 4 x 64) and within
// the tensor-core kernel's tolerance at V4.1's 64 x 512.
#include <cstdio>

#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

using Bytes = ManagedVector<uint8_t>;

// A random attention problem over pools written by `ops` (pools in managed memory).
struct KvProblem {
  int H = 0, D = 0, Q = 0, W = 0, C = 0;
  int64_t pool_rows = 0, comp_rows = 0;
  Rows q, sink;
  Bytes win_pool, fresh, comp_pool;
  ManagedVector<int32_t> wi, ci;  // index lists are backend memory
};

KvProblem make_kv_problem(const Ops& ops, int H, int D, int Q, int W, int C, uint32_t seed) {
  KvProblem p;
  p.H = H, p.D = D, p.Q = Q, p.W = W, p.C = C;
  p.pool_rows = 3 * W, p.comp_rows = 2 * C + 1;
  const int64_t s8 = kv_row_stride(KvFormat::kFp8, D), s4 = kv_row_stride(KvFormat::kFp4, D);
  const Rows win_x = random_rows(static_cast<size_t>(p.pool_rows * D), seed),
             fresh_x = random_rows(static_cast<size_t>(Q * D), seed + 1),
             comp_x = random_rows(static_cast<size_t>(p.comp_rows * D), seed + 2);
  p.win_pool.assign(static_cast<size_t>(p.pool_rows * s8), 0);
  p.fresh.assign(static_cast<size_t>(Q * s8), 0);
  p.comp_pool.assign(static_cast<size_t>(p.comp_rows * s4), 0);
  std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(p.pool_rows, p.comp_rows)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  ops.write_kv({win_x.data(), p.pool_rows, D}, KvFormat::kFp8, ids.data(), p.win_pool.data());
  ops.write_kv({fresh_x.data(), Q, D}, KvFormat::kFp8, ids.data(), p.fresh.data());
  ops.write_kv({comp_x.data(), p.comp_rows, D}, KvFormat::kFp4, ids.data(), p.comp_pool.data());
  sync();
  std::mt19937 rng(seed + 3);
  std::uniform_int_distribution<int> pw(-4, static_cast<int>(p.pool_rows + Q) - 1),
      pc(-4, static_cast<int>(p.comp_rows) - 1);
  p.wi.resize(static_cast<size_t>(Q * W));
  p.ci.resize(static_cast<size_t>(Q * C));
  for (auto& i : p.wi) i = std::max(pw(rng), -1);
  for (auto& i : p.ci) i = std::max(pc(rng), -1);
  p.q = random_rows(static_cast<size_t>(Q * H * D), seed + 4, 0.3f);
  p.sink = random_rows(static_cast<size_t>(H), seed + 5);
  return p;
}

// distinct_rows > 0: the lists' bound on distinct rows (and the compressed pool's rows), which
// lets the CUDA backend decode each row once (the same results).
void run_kv_attention(const Ops& ops, const KvProblem& p, float* out, int64_t distinct_rows = 0) {
  KvAttentionArgs a;
  a.q = p.q.data();
  a.num_queries = p.Q;
  a.num_heads = p.H;
  a.head_dim = p.D;
  a.window_pool = p.win_pool.data();
  a.window_pool_rows = p.pool_rows;
  a.fresh = p.fresh.data();
  a.window_index = p.wi.data();
  a.num_window = p.W;
  a.compressed_pool = p.comp_pool.data();
  a.compressed_index = p.ci.data();
  a.num_compressed = p.C;
  a.sink = p.sink.data();
  a.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.D));
  a.out = out;
  if (distinct_rows > 0) {
    a.distinct_rows = distinct_rows;
    a.compressed_pool_rows = p.comp_rows;
  }
  ops.kv_attention(a);
}

TEST_F(CudaOpsTest, WriteKvStoresTheCpuBytes) {
  for (int dim : {64, 96, 512}) {
    const int64_t rows = 37;
    Rows x = random_rows(static_cast<size_t>(rows * dim), static_cast<uint32_t>(dim), 3.0f);
    for (size_t i = 0; i < x.size(); i += 48) x[i] = round_bf16(x[i] * 1e-6f);  // tiny blocks
    std::vector<int32_t> slots(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) slots[static_cast<size_t>(r)] = r % 5 == 3 ? -1 : 40 - r;
    for (KvFormat f : {KvFormat::kFp8, KvFormat::kFp4}) {
      const size_t n = static_cast<size_t>(41 * kv_row_stride(f, dim));
      Bytes cpu(n, 0xab), gpu(n, 0xab);
      cpu_.write_kv({x.data(), rows, dim}, f, slots.data(), cpu.data());
      gpu_->write_kv({x.data(), rows, dim}, f, slots.data(), gpu.data());
      sync();
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(gpu[i], cpu[i]) << "dim " << dim << (f == KvFormat::kFp8 ? " FP8" : " FP4")
                                  << " byte " << i;
      }
    }
  }
}

TEST_F(CudaOpsTest, KvAttentionIsBitwiseOffTheTensorCoreShape) {
  const KvProblem p = make_kv_problem(cpu_, 4, 64, 6, 24, 70, 11);
  Rows cpu(p.q.size()), gpu(p.q.size(), NAN);
  run_kv_attention(cpu_, p, cpu.data());
  run_kv_attention(*gpu_, p, gpu.data());
  expect_bitwise(gpu, cpu, "kv_attention 4 x 64");
}

TEST_F(CudaOpsTest, KvAttentionOnTensorCoresIsWithinTolerance) {
  const KvProblem p = make_kv_problem(cpu_, 64, 512, 5, 128 + 5, 300, 21);
  Rows cpu(p.q.size()), gpu(p.q.size(), NAN);
  run_kv_attention(cpu_, p, cpu.data());
  run_kv_attention(*gpu_, p, gpu.data());
  sync();
  double err2 = 0, ref2 = 0;
  size_t equal = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    err2 += static_cast<double>(gpu[i] - cpu[i]) * (gpu[i] - cpu[i]);
    ref2 += static_cast<double>(cpu[i]) * cpu[i];
    equal += float_bits(gpu[i]) == float_bits(cpu[i]);
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
  std::printf("kv_attention 64 x 512: rel L2 %.3g, bitwise equal %.2f%%\n", rel,
              100.0 * static_cast<double>(equal) / static_cast<double>(cpu.size()));
  EXPECT_LT(rel, 2e-3);
}

// 80 queries over a few hundred rows: with the bound the CUDA backend builds a key table and the
// seesaw kernel copies from it (on sm_90); its bits equal the default's, also when the bound is
// too small (rows past the table decoded from the pools).
TEST_F(CudaOpsTest, KvAttentionWithADistinctRowBoundIsBitwiseTheSame) {
  const KvProblem p = make_kv_problem(cpu_, 64, 512, 80, 128, 200, 31);
  const int64_t distinct = p.pool_rows + p.Q + p.comp_rows;
  Rows plain(p.q.size(), NAN), table(p.q.size(), NAN), small(p.q.size(), NAN);
  run_kv_attention(*gpu_, p, plain.data());
  run_kv_attention(*gpu_, p, table.data(), distinct);
  run_kv_attention(*gpu_, p, small.data(), 10);
  sync();
  expect_bitwise(table, plain, "kv_attention with a key table");
  expect_bitwise(small, plain, "kv_attention with a 10-row key table");
}

}  // namespace
}  // namespace di::backend::testing
