// The seesaw kernel's gather mode (backend/cuda/sparse_attention_key_table.h): the key table
// holds each distinct stored row decoded once, and the kernel reading it gives the default
// kernels' bits, with rows past the table's capacity decoded from the pools. Skips without a
// CUDA device; the kernel comparisons pass trivially off sm_90 (cudaErrorNotSupported).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_key_table.h"
#include "sparse_attention_test_problem.h"

namespace di::backend::cuda {
namespace {

class SparseAttentionGatherTest : public SparseAttentionFp8Test {
 public:
  // Builds the key table of `args` with `capacity` rows into a fresh workspace (0xff-poisoned).
  SparseAttentionFp8Args with_table(SparseAttentionFp8Args args,
                                    int64_t window_rows,
                                    int64_t extra_rows,
                                    int64_t capacity) {
    const SparseAttentionKeyTableShape s{window_rows, extra_rows, capacity};
    const size_t bytes = sparse_attention_key_table_bytes(args, s);
    void* ws = upload(std::vector<uint8_t>(bytes, 0xff));
    EXPECT_EQ(sparse_attention_key_table(args, s, ws, bytes, nullptr), cudaSuccess);
    return args;
  }
  // The seesaw kernel in gather mode; true off sm_90 or when its bits equal `expect`.
  bool gather_bits(SparseAttentionFp8Args args, const std::vector<uint16_t>& expect) {
    args.wgmma = 3;
    args.split = 1;
    args.heads_per_block = 0;
    EXPECT_EQ(cudaMemset(args.out, 0xff, expect.size() * 2), cudaSuccess);
    const cudaError_t e = sparse_attention_fp8(args, nullptr);
    if (e == cudaErrorNotSupported) return true;
    EXPECT_EQ(e, cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return download(args.out, expect.size()) == expect;
  }
};

// Every bitwise shape of the kernel tests (fresh rows with seed 2), with a table for every row,
// one for 5 rows (most rows decoded from the pools) and none (capacity 0): the mma.sync kernel's
// bits each time.
TEST_F(SparseAttentionGatherTest, MatchesTheDefaultKernelsBitwise) {
  int cases = 0;
  for (const BitwiseCase c : kBitwiseCases) {
    for (uint32_t seed : {1u, 2u}) {
      const BitwiseReference r = bitwise_reference(this, c, seed);
      const Problem& p = r.p;
      for (int64_t capacity : {p.pool8 + p.pool4, int64_t{5}, int64_t{0}}) {
        const SparseAttentionFp8Args g = with_table(r.dp.args, p.pool8, p.pool4, capacity);
        EXPECT_TRUE(gather_bits(g, r.bits))
            << "T=" << c.T << " win=" << c.win << " extra=" << c.extra << " seed " << seed
            << " capacity " << capacity;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 28);
}

// A prefill's lists: query t's window is rows t .. t + 127 (the first ones partly empty), its
// compressed keys an ascending selection from one sequence's entries (a few hundred rows for
// 200 queries: every row read by many queries). Gather mode against the default seesaw kernel.
TEST_F(SparseAttentionGatherTest, PrefillListsMatchTheDefaultSeesawKernel) {
  Problem p = make_problem(200, 128, 512, 31);
  std::mt19937 rng(5);
  for (int64_t t = 0; t < p.T; ++t) {
    for (int i = 0; i < p.win; ++i) {
      const int64_t pos = t - (p.win - 1) + i;
      p.idx[static_cast<size_t>(t * p.win + i)] = pos < 0 ? -1 : static_cast<int32_t>(pos + 50);
    }
    const int visible = static_cast<int>(std::min<int64_t>(600, 100 + 3 * t));
    std::set<int32_t> pick;
    while (static_cast<int>(pick.size()) < std::min(p.extra, visible))
      pick.insert(static_cast<int32_t>(rng() % visible));
    int i = 0;
    for (int32_t e : pick) p.extra_idx[static_cast<size_t>(t * p.extra + i++)] = e + 40;
    for (; i < p.extra; ++i) p.extra_idx[static_cast<size_t>(t * p.extra + i)] = -1;
  }
  DeviceProblem dp = upload_problem(this, p, 9);
  dp.args.wgmma = 3;
  dp.args.split = 1;
  const cudaError_t e = sparse_attention_fp8(dp.args, nullptr);
  if (e == cudaErrorNotSupported) GTEST_SKIP() << "no sm_90 kernels";
  ASSERT_EQ(e, cudaSuccess);
  const auto ref = download(dp.args.out, static_cast<size_t>(p.T * H * D));
  EXPECT_TRUE(gather_bits(with_table(dp.args, p.pool8, p.pool4, 1000), ref));
  EXPECT_TRUE(gather_bits(with_table(dp.args, p.pool8, p.pool4, 300), ref)) << "capacity 300";
}

// The table itself: table row key_rows[t][j] is the device decoder's row of key j's stored row,
// a row gets one table row however many keys read it, empty slots and indices outside their
// pool read row 0 (zeros), and rows past the capacity are ~(index | format << 30).
TEST_F(SparseAttentionGatherTest, KeyTableHoldsEachDistinctRowOnce) {
  Problem p = make_problem(9, 100, 60, 77);
  p.idx[3] = static_cast<int32_t>(p.pool8);        // outside the FP8 pool: empty
  p.extra_idx[5] = static_cast<int32_t>(p.pool4);  // outside the FP4 pool: empty
  DeviceProblem dp = upload_problem(this, p, 3);
  const int keys = p.win + p.extra;
  std::set<int64_t> distinct;
  for (int64_t t = 0; t < p.T; ++t) {
    for (int j = 0; j < keys; ++j) {
      const int32_t r = j < p.win ? p.idx[static_cast<size_t>(t * p.win + j)]
                                  : p.extra_idx[static_cast<size_t>(t * p.extra + j - p.win)];
      const int64_t pool = j < p.win ? p.pool8 : p.pool4;
      if (r >= 0 && r < pool) distinct.insert(j < p.win ? r : p.pool8 + r);
    }
  }
  for (int64_t capacity : {int64_t{100000}, int64_t{40}}) {
    const SparseAttentionFp8Args g = with_table(dp.args, p.pool8, p.pool4, capacity);
    const auto rows = download(g.key_rows, static_cast<size_t>(p.T * keys));
    const int64_t placed = std::min<int64_t>(capacity, static_cast<int64_t>(distinct.size()));
    const auto table = download(g.key_table, static_cast<size_t>((placed + 1) * D));
    EXPECT_TRUE(std::all_of(table.begin(), table.begin() + D, [](uint16_t v) { return v == 0; }));
    std::vector<int64_t> source(static_cast<size_t>(placed + 1), -1);
    int64_t checked = 0, past = 0;
    for (int64_t t = 0; t < p.T; ++t) {
      for (int j = 0; j < keys; ++j) {
        const int32_t r = j < p.win ? p.idx[static_cast<size_t>(t * p.win + j)]
                                    : p.extra_idx[static_cast<size_t>(t * p.extra + j - p.win)];
        const bool fp8 = j < p.win;
        const int32_t v = rows[static_cast<size_t>(t * keys + j)];
        if (r < 0 || r >= (fp8 ? p.pool8 : p.pool4)) {
          EXPECT_EQ(v, 0) << "t " << t << " j " << j;
          continue;
        }
        if (v < 0) {  // past the capacity
          EXPECT_EQ(~v, r | (fp8 ? 0 : 1 << 30)) << "t " << t << " j " << j;
          ++past;
          continue;
        }
        ASSERT_GE(v, 1);
        ASSERT_LE(v, placed);
        const int64_t src = fp8 ? r : p.pool8 + r;
        int64_t& s = source[static_cast<size_t>(v)];
        EXPECT_TRUE(s == -1 || s == src) << "table row " << v << " holds two rows";
        s = src;
        if (checked++ < 200) {  // its words: the device decoder's row (decode_kv_rows)
          uint16_t* dec = upload(std::vector<uint16_t>(D, 0));
          ASSERT_EQ(decode_kv_rows(fp8 ? dp.kv : dp.extra_kv, fp8, upload(std::vector<int32_t>{r}),
                                   1, dec, nullptr),
                    cudaSuccess);
          const auto want = download(dec, D);
          EXPECT_TRUE(std::equal(want.begin(), want.end(), table.begin() + v * D))
              << "table row " << v;
        }
      }
    }
    EXPECT_EQ(std::count(source.begin() + 1, source.end(), -1), 0) << "unused table rows";
    EXPECT_EQ(past > 0, capacity < static_cast<int64_t>(distinct.size()));
  }
}

// out_f32 (the seesaw kernel's float output, which CudaOps takes instead of a conversion pass):
// every value is the bf16 output widened, in both producer modes, with one and many key blocks.
TEST_F(SparseAttentionGatherTest, FloatOutputIsTheBf16OutputWidened) {
  for (const BitwiseCase c : {BitwiseCase{300, 128, 448}, BitwiseCase{277, 1, 60}}) {
    const Problem p = make_problem(c.T, c.win, c.extra, 41 + static_cast<uint32_t>(c.T));
    DeviceProblem dp = upload_problem(this, p, 6);
    SparseAttentionFp8Args a = dp.args;
    a.wgmma = 3;
    a.split = 1;
    if (!sparse_attention_seesaw_runs(a)) GTEST_SKIP() << "no sm_90 kernels";
    const size_t n = static_cast<size_t>(p.T * H * D);
    for (bool gather : {false, true}) {
      SparseAttentionFp8Args b = gather ? with_table(a, p.pool8, p.pool4, 1000) : a;
      ASSERT_EQ(sparse_attention_fp8(b, nullptr), cudaSuccess);
      const auto bits = download(b.out, n);
      b.out = nullptr;
      b.out_f32 = upload(std::vector<float>(n, NAN));
      ASSERT_EQ(sparse_attention_fp8(b, nullptr), cudaSuccess);
      const auto floats = download(b.out_f32, n);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += float_bits(floats[i]) != uint32_t{bits[i]} << 16;
      EXPECT_EQ(bad, 0u) << "T=" << c.T << " gather " << gather;
    }
  }
}

TEST_F(SparseAttentionGatherTest, RejectsBadArguments) {
  const Problem p = make_problem(70, 64, 64, 3);
  DeviceProblem dp = upload_problem(this, p, 4);
  SparseAttentionFp8Args a = dp.args;
  const SparseAttentionKeyTableShape ok{p.pool8, p.pool4, 100};
  const size_t bytes = sparse_attention_key_table_bytes(a, ok);
  void* ws = upload(std::vector<uint8_t>(bytes, 0));
  EXPECT_EQ(sparse_attention_key_table(a, ok, ws, bytes - 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(sparse_attention_key_table(a, {int64_t{1} << 30, p.pool4, 100}, ws, bytes, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(sparse_attention_key_table(a, {p.pool8, p.pool4, -1}, ws, bytes, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(a.key_table, nullptr);
  ASSERT_EQ(sparse_attention_key_table(a, ok, ws, bytes, nullptr), cudaSuccess);
  SparseAttentionFp8Args half = a;
  half.key_rows = nullptr;  // a table without its rows
  EXPECT_EQ(sparse_attention_fp8(half, nullptr), cudaErrorInvalidValue);
  SparseAttentionFp8Args both = dp.args;  // bf16 and float outputs at once
  both.out_f32 = upload(std::vector<float>(static_cast<size_t>(p.T * H * D), 0.0f));
  EXPECT_EQ(sparse_attention_fp8(both, nullptr), cudaErrorInvalidValue);
  both.out = nullptr;  // floats from a kernel other than the seesaw one
  both.wgmma = 1;
  EXPECT_EQ(sparse_attention_fp8(both, nullptr), cudaErrorInvalidValue);
  a.wgmma = 3;
  a.ablate = 1;  // stages left out: not in gather mode
  const cudaError_t e = sparse_attention_fp8(a, nullptr);
  EXPECT_TRUE(e == cudaErrorInvalidValue || e == cudaErrorNotSupported) << cudaGetErrorString(e);
}

}  // namespace
}  // namespace di::backend::cuda
