// The FP8/FP4 KV-cache attention kernel (backend/cuda/sparse_attention_fp8.h) against the CPU
// reference kernels::sparse_attention_query over the same (decoded) keys, the KV writers against
// the reference fake quantization (bitwise), and batch / head-split invariance (bitwise).
// Skips without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/sparse_attention_fp8.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/quant.h"
#include "sparse_attention_test_problem.h"
#include "tensor/numeric.h"

namespace di::backend::cuda {
namespace {

TEST_F(SparseAttentionFp8Test, WritersMatchFakeQuantBitwise) {
  const int64_t n = 300;
  const auto rows = random_kv_rows(n, 11, true);
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) slots[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7) % n);
  uint16_t* d_rows = upload(rows);
  int32_t* d_slots = upload(slots);
  for (bool fp8 : {true, false}) {
    const int row_bytes = fp8 ? kKvFp8RowBytes : kKvFp4RowBytes;
    uint8_t* d_pool = upload(std::vector<uint8_t>(static_cast<size_t>(n * row_bytes), 0xee));
    uint16_t* d_dec = upload(std::vector<uint16_t>(static_cast<size_t>(n * D), 0));
    ASSERT_EQ(fp8 ? write_kv_fp8(d_rows, n, d_slots, d_pool, nullptr)
                  : write_kv_fp4(d_rows, n, d_slots, d_pool, nullptr),
              cudaSuccess);
    ASSERT_EQ(decode_kv_rows(d_pool, fp8, d_slots, n, d_dec, nullptr), cudaSuccess);
    const auto pool = download(d_pool, static_cast<size_t>(n * row_bytes));
    const auto dec = download(d_dec, static_cast<size_t>(n * D));
    std::vector<float> want(D), got(D);
    int64_t bad_bytes = 0, bad_dev = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (int i = 0; i < D; ++i) want[i] = bf16_to_float(rows[static_cast<size_t>(r * D + i)]);
      if (fp8) {
        kernels::fake_quant_row_fp8(want.data(), D, 32);
      } else {
        kernels::fake_quant_row_fp4(want.data(), D, Fp4ScaleKind::kE4m3Block16);
      }
      const uint8_t* row = pool.data() + slots[static_cast<size_t>(r)] * row_bytes;
      fp8 ? decode_fp8_row(row, got.data()) : decode_fp4_row(row, got.data());
      for (int i = 0; i < D; ++i) {
        if (float_bits(got[i]) != float_bits(want[i])) {
          if (bad_bytes++ == 0) {
            ADD_FAILURE() << (fp8 ? "fp8" : "fp4") << " row " << r << " dim " << i << ": decoded "
                          << got[i] << ", fake quant " << want[i];
          }
        }
        // The device decoder: the same value times 2^-32, as bf16 bits.
        const uint16_t dev = dec[static_cast<size_t>(r * D + i)];
        if (dev != float_to_bf16(want[i] * 2.3283064365386963e-10f)) {
          if (bad_dev++ == 0) {
            ADD_FAILURE() << (fp8 ? "fp8" : "fp4") << " device decode row " << r << " dim " << i
                          << ": " << bf16_to_float(dev) * 4294967296.0f << ", want " << want[i];
          }
        }
      }
    }
    EXPECT_EQ(bad_bytes, 0);
    EXPECT_EQ(bad_dev, 0);
  }
}

// The device decoders on every code byte at every byte position of a row (row r, byte i holds
// (r + 37 i) mod 256), with varied scales: bitwise the host decoders' values times 2^-32. Each
// decoded pair depends only on its own code byte (FP4: both nibbles; FP8: one code each), so this
// covers every input the decoders see (the e4m3 NaN codes, which no writer produces, excepted).
TEST_F(SparseAttentionFp8Test, DeviceDecodersCoverEveryCodeByte) {
  const int64_t n = 256;
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) slots[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  int32_t* d_slots = upload(slots);
  for (bool fp8 : {true, false}) {
    const int row_bytes = fp8 ? kKvFp8RowBytes : kKvFp4RowBytes;
    const int code_bytes = fp8 ? 512 : 256;
    std::vector<uint8_t> pool(static_cast<size_t>(n * row_bytes));
    for (int64_t r = 0; r < n; ++r) {
      uint8_t* row = pool.data() + r * row_bytes;
      for (int i = 0; i < code_bytes; ++i) row[i] = static_cast<uint8_t>((r + 37 * i) & 0xff);
      for (int j = 0; j < row_bytes - code_bytes; ++j) {
        // ue8m0 scales 2^-17 .. 2^12; e4m3 scales over every positive code, subnormals included.
        row[code_bytes + j] =
            static_cast<uint8_t>(fp8 ? 110 + (r + j) % 30 : 1 + (r * 3 + j * 5) % 126);
      }
    }
    uint8_t* d_pool = upload(pool);
    uint16_t* d_dec = upload(std::vector<uint16_t>(static_cast<size_t>(n * D), 0));
    ASSERT_EQ(decode_kv_rows(d_pool, fp8, d_slots, n, d_dec, nullptr), cudaSuccess);
    const auto dec = download(d_dec, static_cast<size_t>(n * D));
    std::vector<float> want(D);
    int64_t bad = 0, checked = 0;
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* row = pool.data() + r * row_bytes;
      fp8 ? decode_fp8_row(row, want.data()) : decode_fp4_row(row, want.data());
      for (int i = 0; i < D; ++i) {
        if (fp8 && (row[i] & 0x7f) == 0x7f) continue;  // e4m3 NaN
        ++checked;
        const uint16_t got = dec[static_cast<size_t>(r * D + i)];
        if (got != float_to_bf16(want[i] * 2.3283064365386963e-10f) && bad++ == 0) {
          ADD_FAILURE() << (fp8 ? "fp8" : "fp4") << " row " << r << " dim " << i << " code byte "
                        << int{row[fp8 ? i : i / 2]} << ": " << bf16_to_float(got) * 4294967296.0f
                        << ", want " << want[i];
        }
      }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_GT(checked, n * D * 9 / 10);
  }
}

std::vector<float> cpu_reference(const Problem& p, const DeviceProblem& dp, float scale) {
  std::vector<float> dec8(static_cast<size_t>(p.pool8 * D)), dec4(static_cast<size_t>(p.pool4 * D));
  for (int64_t r = 0; r < p.pool8; ++r)
    decode_fp8_row(dp.kv_host.data() + r * kKvFp8RowBytes, dec8.data() + r * D);
  for (int64_t r = 0; r < p.pool4; ++r)
    decode_fp4_row(dp.extra_host.data() + r * kKvFp4RowBytes, dec4.data() + r * D);
  std::vector<float> out(static_cast<size_t>(p.T * H * D)), q(static_cast<size_t>(H * D));
  std::vector<const float*> keys(static_cast<size_t>(p.win + p.extra));
  for (int64_t t = 0; t < p.T; ++t) {
    for (int i = 0; i < p.win; ++i) {
      const int32_t r = p.idx[static_cast<size_t>(t * p.win + i)];
      keys[static_cast<size_t>(i)] = r < 0 ? nullptr : dec8.data() + static_cast<int64_t>(r) * D;
    }
    for (int i = 0; i < p.extra; ++i) {
      const int32_t r = p.extra_idx[static_cast<size_t>(t * p.extra + i)];
      keys[static_cast<size_t>(p.win + i)] =
          r < 0 ? nullptr : dec4.data() + static_cast<int64_t>(r) * D;
    }
    for (int i = 0; i < H * D; ++i)
      q[static_cast<size_t>(i)] = bf16_to_float(p.q[static_cast<size_t>(t * H * D + i)]);
    kernels::sparse_attention_query(q.data(), H, D, keys.data(), p.win + p.extra, p.sink.data(),
                                    scale, out.data() + t * H * D);
  }
  return out;
}

TEST_F(SparseAttentionFp8Test, MatchesCpuReferenceWithinTolerance) {
  struct Case {
    int64_t T;
    int win, extra;
  };
  for (const Case c :
       {Case{5, 128, 512}, Case{3, 70, 33}, Case{2, 0, 100}, Case{2, 128, 0}, Case{2, 128, 2048}}) {
    const Problem p =
        make_problem(c.T, c.win, c.extra, static_cast<uint32_t>(c.T * 1000 + c.extra));
    DeviceProblem dp = upload_problem(this, p, static_cast<uint32_t>(c.win + 7));
    // Both paths: one block per query (split = 1) and key blocks spread over blocks (2).
    dp.args.split = 2;
    ASSERT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaSuccess);
    const auto split_bits = download(dp.args.out, static_cast<size_t>(p.T * H * D));
    dp.args.split = 1;
    ASSERT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto gpu_bits = download(dp.args.out, static_cast<size_t>(p.T * H * D));
    EXPECT_TRUE(split_bits == gpu_bits)
        << "split path differs, T=" << c.T << " win=" << c.win << " extra=" << c.extra;
    EXPECT_TRUE(pv_tiles_bits(dp.args, 1, 64, gpu_bits)) << "row-group PV tiles differ, T=" << c.T;
    dp.args.wgmma = 1;  // the mma.sync kernel above; the wgmma kernel (sm_90 only) must match
    EXPECT_TRUE(wgmma_bits(dp.args, gpu_bits)) << "wgmma kernel differs, T=" << c.T;
    const auto cpu = cpu_reference(p, dp, dp.args.softmax_scale);
    // Tolerance: the sums inside the MMAs run in another order than the CPU's 8-lane dots and the
    // exp is ex2.approx, so an fp32 logit or p can differ in its last bits; that moves a bf16
    // rounding of p (2^-8 relative, one key) or of the output (one bf16 ulp, 2^-8 relative) now
    // and then. Bound: |gpu - cpu| <= 2^-7 |cpu| + 2^-10 max|row|, and a relative L2 error
    // under 2e-3 (a few flipped bf16 roundings, not a wrong key or block).
    double err2 = 0, ref2 = 0;
    int64_t equal = 0, bad = 0;
    for (int64_t row = 0; row < p.T * H; ++row) {
      float rmax = 0;
      for (int i = 0; i < D; ++i)
        rmax = std::max(rmax, std::fabs(cpu[static_cast<size_t>(row * D + i)]));
      for (int i = 0; i < D; ++i) {
        const size_t k = static_cast<size_t>(row * D + i);
        const float g = bf16_to_float(gpu_bits[k]), r = cpu[k];
        err2 += static_cast<double>(g - r) * (g - r);
        ref2 += static_cast<double>(r) * r;
        equal += float_bits(g) == float_bits(r);
        if (!(std::fabs(g - r) <= std::fabs(r) / 128 + rmax / 1024)) {
          if (bad++ == 0) {
            ADD_FAILURE() << "T=" << c.T << " win=" << c.win << " extra=" << c.extra << " row "
                          << row << " dim " << i << ": gpu " << g << " cpu " << r;
          }
        }
      }
    }
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
    std::printf("sparse_attention_fp8 T=%lld win=%d extra=%d: rel L2 %.3g, bitwise equal %.2f%%\n",
                static_cast<long long>(c.T), c.win, c.extra, rel,
                100.0 * static_cast<double>(equal) / static_cast<double>(cpu.size()));
    EXPECT_EQ(bad, 0);
    EXPECT_LT(rel, 2e-3);
  }
}

TEST_F(SparseAttentionFp8Test, OutputBitsDoNotDependOnBatchOrHeadSplit) {
  const Problem p = make_problem(40, 128, 512, 99);
  DeviceProblem dp = upload_problem(this, p, 5);
  const size_t n = static_cast<size_t>(p.T * H * D);
  std::vector<std::vector<uint16_t>> outs;
  // Heads per block 0 (automatic), 16, 32, 64 on the one-block path, then the split path;
  // the one-block path with both PV tilings (1xx: row-group tiles).
  for (int h : {0, 16, 32, 64, -1, 116, 132, 164}) {
    dp.args.heads_per_block = h < 0 ? 0 : h % 100;
    dp.args.split = h < 0 ? 2 : 1;
    dp.args.pv_tiles = h > 100 ? 1 : 0;
    ASSERT_EQ(cudaMemset(dp.args.out, 0xff, n * 2), cudaSuccess);
    ASSERT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaSuccess);
    outs.push_back(download(dp.args.out, n));
  }
  for (size_t v = 1; v < outs.size(); ++v) EXPECT_TRUE(outs[v] == outs[0]) << "variant " << v;
  dp.args.pv_tiles = 0;
  EXPECT_TRUE(wgmma_bits(dp.args, outs[0])) << "wgmma kernel";
  // Queries alone (T = 1: the split path, automatic; then one block, 64 heads per block)
  // against the batch of 40.
  for (int64_t t : {0, 7, 39}) {
    for (int split : {0, 1}) {
      SparseAttentionFp8Args one = dp.args;
      one.heads_per_block = split ? 64 : 0;
      one.split = split;
      one.num_queries = 1;
      one.q = dp.args.q + t * H * D;
      one.indices = dp.args.indices + t * p.win;
      one.extra_indices = dp.args.extra_indices + t * p.extra;
      one.out = upload(std::vector<uint16_t>(static_cast<size_t>(H * D), 0));
      ASSERT_EQ(sparse_attention_fp8(one, nullptr), cudaSuccess);
      const auto alone = download(one.out, static_cast<size_t>(H * D));
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), outs[0].begin() + t * H * D))
          << "query " << t << " split " << split;
      EXPECT_TRUE(wgmma_bits(one, alone)) << "query " << t << " alone, wgmma kernel";
      EXPECT_TRUE(pv_tiles_bits(one, 1, 64, alone)) << "query " << t << " alone, row-group PV";
    }
  }
}

// From kAttnSeesawMinQueries queries the automatic path runs another kernel on sm_90 (the
// warp-specialised one): a query's bits must still not depend on the batch it came in. The batch
// of 70 (automatic path) against each query alone (the split path) and against the one-block
// mma.sync kernel over the whole batch.
TEST_F(SparseAttentionFp8Test, AutomaticPathAtManyQueriesMatchesQueriesAlone) {
  const Problem p = make_problem(70, 128, 512, 123);
  ASSERT_GE(p.T, kAttnSeesawMinQueries);
  DeviceProblem dp = upload_problem(this, p, 17);
  const size_t n = static_cast<size_t>(p.T * H * D);
  ASSERT_EQ(cudaMemset(dp.args.out, 0xff, n * 2), cudaSuccess);
  ASSERT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaSuccess);
  const auto batch = download(dp.args.out, n);
  SparseAttentionFp8Args mma = dp.args;
  mma.wgmma = 1;
  mma.out = upload(std::vector<uint16_t>(n, 0x7fc1));
  ASSERT_EQ(sparse_attention_fp8(mma, nullptr), cudaSuccess);
  EXPECT_TRUE(download(mma.out, n) == batch) << "mma.sync kernel over the batch";
  const size_t ws_bytes = sparse_attention_fp8_workspace_bytes(1, p.win + p.extra);
  void* ws = upload(std::vector<uint8_t>(ws_bytes, 0));
  for (int64_t t : {0, 31, 69}) {
    SparseAttentionFp8Args one = dp.args;
    one.num_queries = 1;
    one.q = dp.args.q + t * H * D;
    one.indices = dp.args.indices + t * p.win;
    one.extra_indices = dp.args.extra_indices + t * p.extra;
    one.out = upload(std::vector<uint16_t>(static_cast<size_t>(H * D), 0));
    one.workspace = ws;
    one.workspace_bytes = ws_bytes;
    ASSERT_EQ(sparse_attention_fp8(one, nullptr), cudaSuccess);
    const auto alone = download(one.out, static_cast<size_t>(H * D));
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + t * H * D))
        << "query " << t << " alone (split path)";
  }
}

// The sm_90a kernels (two warpgroups; the warp-specialised seesaw kernel) against the mma.sync
// kernel (64 heads per block), bitwise, over shapes that cover mixed FP8/FP4 key blocks, partial
// and empty blocks, empty slots, no keys, many blocks, fresh rows, and several batch sizes.
TEST_F(SparseAttentionFp8Test, WgmmaKernelMatchesMmaSyncBitwise) {
  int cases = 0;
  for (const BitwiseCase c : kBitwiseCases) {
    for (uint32_t seed : {1u, 2u}) {
      BitwiseReference r = bitwise_reference(this, c, seed);
      const std::vector<uint16_t>& ref = r.bits;
      r.dp.args.out = upload(std::vector<uint16_t>(ref.size(), 0x7fc1));
      EXPECT_TRUE(wgmma_bits(r.dp.args, ref))
          << "T=" << c.T << " win=" << c.win << " extra=" << c.extra << " seed " << seed;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 28);
}

// The one-block kernel's two PV tilings (all heads x 64 dims per warp, the default; 16 heads x
// 512 / kWk dims per warp, the earlier one) at every heads-per-block choice, bitwise, over the
// shapes above; reference: the row-group tiles at 64 heads per block.
TEST_F(SparseAttentionFp8Test, PvTilesMatchBitwise) {
  int cases = 0;
  for (const BitwiseCase c : kBitwiseCases) {
    for (uint32_t seed : {1u, 2u}) {
      const Problem p = make_problem(c.T, c.win, c.extra, seed * 7 + static_cast<uint32_t>(c.T));
      DeviceProblem dp = upload_bitwise_case(this, p, c, seed);
      dp.args.pv_tiles = 1;
      ASSERT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaSuccess);
      const auto ref = download(dp.args.out, static_cast<size_t>(p.T * H * D));
      for (int h : {16, 32, 64}) {
        EXPECT_TRUE(pv_tiles_bits(dp.args, 2, h, ref))
            << "T=" << c.T << " win=" << c.win << " extra=" << c.extra << " seed " << seed
            << " heads " << h;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 28);
}

TEST_F(SparseAttentionFp8Test, RejectsBadShapes) {
  SparseAttentionFp8Args a;
  a.num_queries = 1;
  EXPECT_EQ(sparse_attention_fp8(a, nullptr), cudaErrorInvalidValue);  // null pointers
  const Problem p = make_problem(2, 64, 64, 3);
  DeviceProblem dp = upload_problem(this, p, 4);
  dp.args.split = 1;
  dp.args.pv_tiles = 3;  // only 0, 1 and 2 exist
  EXPECT_EQ(sparse_attention_fp8(dp.args, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace di::backend::cuda