// sparse_attention and index_scores against plain double-precision references.
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_ops.h"
#include "op_test_util.h"

namespace di::backend {
namespace {

using di::testing::expect_close;
using di::testing::poisoned;
using di::testing::random_vector;

TEST(SparseAttention, MatchesSinkSoftmaxReference) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  const int H = 3, D = 32, Q = 4, N = 150;  // 150 keys: three online-softmax blocks of 64
  auto q = random_vector(static_cast<size_t>(Q * H * D), 1, 0.3f);
  auto kv = random_vector(static_cast<size_t>(N * D), 2);
  auto sink = random_vector(H, 3, 1.0f, false);
  std::vector<const float*> keys(static_cast<size_t>(Q * N));
  for (int t = 0; t < Q; ++t)
    for (int i = 0; i < N; ++i)  // every third key of query t is an empty slot
      keys[static_cast<size_t>(t * N + i)] = (i + t) % 3 == 0 ? nullptr : kv.data() + i * D;
  auto out = poisoned(static_cast<size_t>(Q * H * D));
  SparseAttentionArgs a{q.data(), Q, H, D, keys.data(), N, sink.data(), 0.17f, out.data()};
  ops.sparse_attention(a);
  std::vector<double> ref(out.size());
  for (int t = 0; t < Q; ++t)
    for (int h = 0; h < H; ++h) {
      std::vector<double> s(N, -INFINITY);
      double mx = sink[h];
      for (int i = 0; i < N; ++i) {
        if (!keys[t * N + i]) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(q[(t * H + h) * D + d]) * kv[i * D + d];
        s[i] = dot * 0.17f;
        mx = std::max(mx, s[i]);
      }
      double den = std::exp(sink[h] - mx);
      for (int i = 0; i < N; ++i) den += std::exp(s[i] - mx);
      for (int d = 0; d < D; ++d) {
        double num = 0;
        for (int i = 0; i < N; ++i)
          num += std::exp(s[i] - mx) * (keys[t * N + i] ? kv[i * D + d] : 0);
        ref[(t * H + h) * D + d] = num / den;
      }
    }
  // Probabilities are rounded to bf16 before the value product, and the output to bf16.
  expect_close(out, ref, 1.6e-2, 2e-3, "sparse_attention");
}

TEST(SparseAttention, NoKeysGivesZeros) {
  ThreadPool pool(1);
  CpuOps ops(pool);
  auto q = random_vector(64, 4);
  std::vector<const float*> keys(10, nullptr);
  float sink = 0.5f;
  auto out = poisoned(64);
  ops.sparse_attention({q.data(), 1, 1, 64, keys.data(), 10, &sink, 0.125f, out.data()});
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(IndexScores, MatchesBf16Reference) {
  ThreadPool pool(2);
  CpuOps ops(pool);
  const int H = 4, D = 32, Q = 3, N = 20;
  auto q = random_vector(static_cast<size_t>(Q * H * D), 5);
  auto w = random_vector(static_cast<size_t>(Q * H), 6, 0.1f);
  auto k = random_vector(static_cast<size_t>(N * D), 7);
  // Keys in a paged pool of 4-entry pages, stored in reverse page order: key s lives in pool
  // row (4 - s / 4) * 4 + s % 4 (pool pages 0 .. 4 hold key pages 4 .. 0).
  const int per = 4;
  std::vector<float> key_pool(static_cast<size_t>(N * D));
  const std::vector<int32_t> pages = {4, 3, 2, 1, 0};
  for (int s = 0; s < N; ++s) {
    std::copy_n(k.begin() + s * D, D, key_pool.begin() + (pages[s / per] * per + s % per) * D);
  }
  const std::vector<int64_t> page_offset = {0, 0, 0};
  std::vector<int64_t> visible = {0, 7, 20};
  auto scores = poisoned(static_cast<size_t>(Q * N));
  IndexScoreArgs a;
  a.q = q.data();
  a.weights = w.data();
  a.num_queries = Q;
  a.num_heads = H;
  a.head_dim = D;
  a.key_pool = key_pool.data();
  a.pages = pages.data();
  a.num_pages = 5;
  a.page_offset = page_offset.data();
  a.entries_per_page = per;
  a.num_keys = N;
  a.num_visible = visible.data();
  a.scores = scores.data();
  ops.index_scores(a);
  for (int t = 0; t < Q; ++t)
    for (int s = 0; s < N; ++s) {
      float got = scores[static_cast<size_t>(t * N + s)];
      if (s >= visible[static_cast<size_t>(t)]) {
        EXPECT_EQ(got, -std::numeric_limits<float>::infinity());
        continue;
      }
      // The reference rounds each head's dot product, each weighted term and the sum to bf16;
      // allow those roundings (2^-8 relative each) on the magnitudes involved.
      double total = 0, magnitude = 0;
      for (int h = 0; h < H; ++h) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(q[(t * H + h) * D + d]) * k[s * D + d];
        total += std::max(dot, 0.0) * w[t * H + h];
        magnitude += std::fabs(std::max(dot, 0.0) * w[t * H + h]);
      }
      EXPECT_NEAR(got, total,
                  magnitude * 2 * std::ldexp(1.0, -8) + std::fabs(total) * std::ldexp(1.0, -8))
          << "query " << t << " key " << s;
    }
}

}  // namespace
}  // namespace di::backend
