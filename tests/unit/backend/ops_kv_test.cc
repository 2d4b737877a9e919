// The KV cache's stored formats (backend/kv_format.h): the reference codecs against the fake
// quantization they stand for, and CpuOps' write_kv / kv_attention against sparse_attention over
// the fake-quantized fp32 rows (bitwise: the model's CPU logits must not move).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "kernels/ref/kv_codec.h"
#include "kernels/ref/quant.h"
#include "op_test_util.h"
#include "tensor/numeric.h"

namespace di::backend {
namespace {

// bf16-exact rows whose 16-blocks span many magnitudes (scales from 2^-30 to 2^12), with zero
// blocks and signed zeros, so that every scale path of both formats is taken.
std::vector<float> wide_rows(int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-30, 12);
  std::vector<float> x(static_cast<size_t>(rows * dim));
  for (size_t b = 0; b < x.size(); b += 16) {
    const int k = e(rng);
    for (size_t i = b; i < b + 16; ++i) {
      x[i] = k == -30 ? (i % 2 ? -0.0f : 0.0f) : round_bf16(std::ldexp(n(rng), k));
    }
  }
  return x;
}

void expect_same_bits(const float* a, const float* b, size_t n, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_bits(a[i]), float_bits(b[i]))
        << what << " element " << i << ": " << a[i] << " vs " << b[i];
  }
}

TEST(KvCodec, DecodingGivesTheFakeQuantizationBitwise) {
  for (int64_t dim : {32, 64, 512}) {
    const int64_t rows = 40;
    const auto x = wide_rows(rows, dim, static_cast<uint32_t>(dim));
    for (KvFormat f : {KvFormat::kFp8, KvFormat::kFp4}) {
      std::vector<uint8_t> row(static_cast<size_t>(kv_row_bytes(f, dim)));
      std::vector<float> want(static_cast<size_t>(dim)), got(want.size());
      for (int64_t r = 0; r < rows; ++r) {
        std::copy_n(x.begin() + r * dim, dim, want.begin());
        if (f == KvFormat::kFp8) {
          kernels::fake_quant_row_fp8(want.data(), dim, 32);
        } else {
          kernels::fake_quant_row_fp4(want.data(), dim, Fp4ScaleKind::kE4m3Block16);
        }
        kernels::encode_kv_row(x.data() + r * dim, dim, f, row.data());
        kernels::decode_kv_row(row.data(), dim, f, got.data());
        expect_same_bits(got.data(), want.data(), want.size(), "decode(encode(x))");
        // Stored rows are re-encoded unchanged (the model writes fake-quantized window rows).
        if (f == KvFormat::kFp8) {
          std::vector<uint8_t> again(row.size());
          kernels::encode_kv_row(want.data(), dim, f, again.data());
          kernels::decode_kv_row(again.data(), dim, f, got.data());
          expect_same_bits(got.data(), want.data(), want.size(), "FP8 re-encoding");
        }
      }
    }
  }
  EXPECT_EQ(kv_row_bytes(KvFormat::kFp8, 512), 528);
  EXPECT_EQ(kv_row_bytes(KvFormat::kFp4, 512), 288);
  EXPECT_EQ(kv_row_stride(KvFormat::kFp8, 64), 68);  // 66 bytes rounded up to a float
}

TEST(KvAttention, EqualsSparseAttentionOverTheDecodedRowsBitwise) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  const int H = 3, D = 64, Q = 5, W = 70, C = 40;  // 110 keys: two online-softmax blocks
  const int64_t pool_rows = 30, fresh_rows = Q, comp_rows = 50;
  const int64_t s8 = kv_row_stride(KvFormat::kFp8, D), s4 = kv_row_stride(KvFormat::kFp4, D);
  // Values before quantization; the reference reads their fake quantization.
  const auto win_x = wide_rows(pool_rows, D, 1), fresh_x = wide_rows(fresh_rows, D, 2),
             comp_x = wide_rows(comp_rows, D, 3);
  std::vector<uint8_t> win_pool(static_cast<size_t>(pool_rows * s8)),
      fresh(static_cast<size_t>(fresh_rows * s8)), comp_pool(static_cast<size_t>(comp_rows * s4));
  std::vector<int32_t> ids(static_cast<size_t>(comp_rows));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(ids.size() - 1 - i);
  ops.write_kv({win_x.data(), pool_rows, D}, KvFormat::kFp8, ids.data() + (comp_rows - pool_rows),
               win_pool.data());
  ops.write_kv({fresh_x.data(), fresh_rows, D}, KvFormat::kFp8,
               ids.data() + (comp_rows - fresh_rows), fresh.data());
  ops.write_kv({comp_x.data(), comp_rows, D}, KvFormat::kFp4, ids.data(), comp_pool.data());
  // The reference rows: row i of each pool is input row (n - 1 - i), fake-quantized.
  auto fq = [&](const std::vector<float>& x, int64_t n, bool fp8) {
    std::vector<float> y(x.size());
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(x.begin() + (n - 1 - i) * D, D, y.begin() + i * D);
      if (fp8) {
        kernels::fake_quant_row_fp8(y.data() + i * D, D, 32);
      } else {
        kernels::fake_quant_row_fp4(y.data() + i * D, D, Fp4ScaleKind::kE4m3Block16);
      }
    }
    return y;
  };
  const auto win_f = fq(win_x, pool_rows, true), fresh_f = fq(fresh_x, fresh_rows, true),
             comp_f = fq(comp_x, comp_rows, false);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick_w(-8, static_cast<int>(pool_rows + fresh_rows) - 1),
      pick_c(-8, static_cast<int>(comp_rows) - 1);
  std::vector<int32_t> wi(static_cast<size_t>(Q * W)), ci(static_cast<size_t>(Q * C));
  std::vector<const float*> keys(static_cast<size_t>(Q * (W + C)));
  for (int t = 0; t < Q; ++t) {
    for (int j = 0; j < W; ++j) {
      const int i = t == 2 ? -1 : pick_w(rng);  // query 2: no window keys
      wi[static_cast<size_t>(t * W + j)] = i < 0 ? -1 : i;
      keys[static_cast<size_t>(t * (W + C) + j)] = i < 0 ? nullptr
                                                   : i < pool_rows
                                                       ? win_f.data() + i * D
                                                       : fresh_f.data() + (i - pool_rows) * D;
    }
    for (int j = 0; j < C; ++j) {
      const int i = pick_c(rng);
      ci[static_cast<size_t>(t * C + j)] = i < 0 ? -1 : i;
      keys[static_cast<size_t>(t * (W + C) + W + j)] = i < 0 ? nullptr : comp_f.data() + i * D;
    }
  }
  auto q = di::testing::random_vector(static_cast<size_t>(Q * H * D), 8, 0.3f);
  auto sink = di::testing::random_vector(H, 9, 1.0f, false);
  std::vector<float> want(q.size()), got(q.size(), NAN);
  ops.sparse_attention({q.data(), Q, H, D, keys.data(), W + C, sink.data(), 0.125f, want.data()});
  KvAttentionArgs a;
  a.q = q.data();
  a.num_queries = Q;
  a.num_heads = H;
  a.head_dim = D;
  a.window_pool = win_pool.data();
  a.window_pool_rows = pool_rows;
  a.fresh = fresh.data();
  a.window_index = wi.data();
  a.num_window = W;
  a.compressed_pool = comp_pool.data();
  a.compressed_index = ci.data();
  a.num_compressed = C;
  a.sink = sink.data();
  a.softmax_scale = 0.125f;
  a.out = got.data();
  ops.kv_attention(a);
  expect_same_bits(got.data(), want.data(), want.size(), "kv_attention");

  // Null slots store row r at pool row r.
  std::vector<uint8_t> fresh2(fresh.size());
  ops.write_kv({fresh_x.data(), fresh_rows, D}, KvFormat::kFp8, nullptr, fresh2.data());
  for (int64_t r = 0; r < fresh_rows; ++r) {
    EXPECT_TRUE(std::equal(fresh2.begin() + r * s8, fresh2.begin() + (r + 1) * s8,
                           fresh.begin() + (fresh_rows - 1 - r) * s8))
        << "row " << r;
  }
}

}  // namespace
}  // namespace di::backend
