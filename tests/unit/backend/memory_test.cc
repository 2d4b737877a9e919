// Backend memory on the host (HostMemory, the CPU backend's) and the MoE combine's row ops,
// against plain loops written out in the test.
#include "backend/memory.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "tensor/numeric.h"

namespace di::backend {
namespace {

std::vector<float> iota_rows(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = round_bf16(scale * (i % 97) - 3.0f);
  return v;
}

TEST(HostMemory, BufferCopiesAndGathers) {
  const HostMemory m;
  const auto host = iota_rows(5 * 8, 0.37f);
  Buffer b(m, 5, 8);
  b.from_host(host);
  EXPECT_EQ(b.to_host(), host);
  Buffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.to_host(), host);

  Buffer slice(m, 5, 3);
  m.copy_2d(moved.data() + 2, 8, slice.data(), 3, 3, 5);
  const auto got = slice.to_host();
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[static_cast<size_t>(r * 3 + c)], host[static_cast<size_t>(r * 8 + 2 + c)]);
  }
  const std::vector<int64_t> rows = {4, 0, 4};
  Buffer g(m, 3, 8);
  m.gather_rows(moved.view(), rows.data(), g.view());
  const auto gv = g.to_host();
  for (int i = 0; i < 3; ++i) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(gv[static_cast<size_t>(i * 8 + c)],
                host[static_cast<size_t>(rows[static_cast<size_t>(i)] * 8 + c)]);
    }
  }
  m.fill(g.data(), 2.5f, g.size());
  EXPECT_EQ(g.to_host(), std::vector<float>(24, 2.5f));
  // Rows through pointer tables: row 1 of `moved` to row 2 of g, row 3 (cols 2..6) to row 0.
  const std::vector<const float*> src = {moved.data() + 8, moved.data() + 26};
  const std::vector<float*> dst = {g.data() + 16, g.data()};
  m.copy_rows(src.data(), dst.data(), 2, 5);
  const auto cv = g.to_host();
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(cv[static_cast<size_t>(16 + c)], c < 5 ? host[static_cast<size_t>(8 + c)] : 2.5f);
    EXPECT_EQ(cv[static_cast<size_t>(c)], c < 5 ? host[static_cast<size_t>(26 + c)] : 2.5f);
    EXPECT_EQ(cv[static_cast<size_t>(8 + c)], 2.5f);
  }
}

TEST(CpuOps, MoeCombineRowOps) {
  ThreadPool pool(1);
  const CpuOps ops(pool);
  const int64_t rows = 4, cols = 6;
  std::vector<float> acc(static_cast<size_t>(rows * cols), 0.0f), want = acc;
  const auto a = iota_rows(2 * cols, 0.11f), b = iota_rows(2 * cols, 0.23f);
  const std::vector<int64_t> ra = {3, 1}, rb = {1, 0};
  ops.add_rows({a.data(), 2, cols}, ra.data(), {acc.data(), rows, cols});
  ops.add_rows({b.data(), 2, cols}, rb.data(), {acc.data(), rows, cols});
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < cols; ++c) {
      want[static_cast<size_t>(ra[static_cast<size_t>(i)] * cols + c)] +=
          a[static_cast<size_t>(i * cols + c)];
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < cols; ++c) {
      want[static_cast<size_t>(rb[static_cast<size_t>(i)] * cols + c)] +=
          b[static_cast<size_t>(i * cols + c)];
    }
  }
  EXPECT_EQ(acc, want);
  const auto shared = iota_rows(rows * cols, 0.031f);
  std::vector<float> out(acc.size());
  ops.add_round_bf16({acc.data(), rows, cols}, {shared.data(), rows, cols},
                     {out.data(), rows, cols});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], round_bf16(acc[i] + shared[i]));
  std::vector<float> scaled = acc;
  ops.scale_round_bf16({scaled.data(), rows, cols}, 0.3f);
  for (size_t i = 0; i < scaled.size(); ++i) EXPECT_EQ(scaled[i], round_bf16(acc[i] * 0.3f));
}

}  // namespace
}  // namespace di::backend
