// CudaOps sparse attention and indexer scores against CpuOps, and the error path: a device error
// is latched in status() rather than aborting.
#include <numeric>

#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

TEST_F(CudaOpsTest, SparseAttentionMatchesCpu) {
  const int64_t nq = 5, nk = 150;  // three key blocks, the last one partial
  const int heads = 4, dim = 64;
  auto q = random_rows(static_cast<size_t>(nq * heads * dim), 61);
  auto kv = random_rows(static_cast<size_t>(200 * dim), 62);
  auto sink = random_rows(static_cast<size_t>(heads), 63);
  std::mt19937 rng(64);
  std::uniform_int_distribution<int> pick(-20, 199);
  std::vector<const float*> keys(static_cast<size_t>(nq * nk));
  for (auto& k : keys) {
    const int r = pick(rng);
    k = r < 0 ? nullptr : kv.data() + static_cast<int64_t>(r) * dim;
  }
  for (int64_t i = 0; i < nk; ++i) keys[static_cast<size_t>(3 * nk + i)] = nullptr;  // no keys
  SparseAttentionArgs a;
  a.q = q.data();
  a.num_queries = nq;
  a.num_heads = heads;
  a.head_dim = dim;
  a.keys = keys.data();
  a.num_keys = nk;
  a.sink = sink.data();
  a.softmax_scale = 0.125f;
  Rows cpu(q.size()), gpu(q.size(), NAN);
  a.out = cpu.data();
  cpu_.sparse_attention(a);
  a.out = gpu.data();
  gpu_->sparse_attention(a);
  expect_nearly_bitwise(gpu, cpu, 0.99, 1.0 / 64, "sparse_attention");
}

void index_scores_case(
    const Ops& cpu_ops, const Ops& gpu_ops, int64_t nq, int64_t nk, int heads, int dim) {
  auto q = random_rows(static_cast<size_t>(nq * heads * dim), 71);
  auto w = random_rows(static_cast<size_t>(nq * heads), 72);
  // Every query reads its own page table over one pool of 16-entry pages (shuffled pages).
  const int per = 16;
  const int64_t pages_per_query = (nk + per - 1) / per;
  const int64_t pool_pages = pages_per_query + 5;
  auto pool = random_rows(static_cast<size_t>(pool_pages * per * dim), 73);
  std::vector<int32_t> pages;
  std::vector<int64_t> page_offset;
  std::mt19937 rng(74);
  for (int64_t t = 0; t < nq; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(pool_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    page_offset.push_back(static_cast<int64_t>(pages.size()));
    pages.insert(pages.end(), order.begin(), order.begin() + pages_per_query);
  }
  std::vector<int64_t> visible(static_cast<size_t>(nq), nk);
  visible[1] = 3;
  visible[2] = 0;
  IndexScoreArgs a;
  a.q = q.data();
  a.weights = w.data();
  a.num_queries = nq;
  a.num_heads = heads;
  a.head_dim = dim;
  a.key_pool = pool.data();
  a.pages = pages.data();
  a.num_pages = static_cast<int64_t>(pages.size());
  a.page_offset = page_offset.data();
  a.entries_per_page = per;
  a.num_keys = nk;
  a.num_visible = visible.data();
  Rows cpu(static_cast<size_t>(nq * nk)), gpu(cpu.size(), NAN);
  a.scores = cpu.data();
  cpu_ops.index_scores(a);
  a.scores = gpu.data();
  gpu_ops.index_scores(a);
  expect_bitwise(gpu, cpu, "index_scores");
}

TEST_F(CudaOpsTest, IndexScoresMatchCpuBitwise) {
  // Few pairs take the block-per-pair kernel (the V4.1 indexer's 64 x 128 among them), 40,000 the
  // thread-per-pair one; dim 36 leaves a tail past the 8-lane chains.
  struct Case {
    int64_t nq, nk;
    int heads, dim;
  };
  for (const Case& c : {Case{3, 70, 8, 32}, Case{3, 90, 64, 128}, Case{40, 1000, 4, 36}}) {
    index_scores_case(cpu_, *gpu_, c.nq, c.nk, c.heads, c.dim);
  }
}

TEST(CudaOpsErrors, ArenaExhaustionIsAStatusNotAnAbort) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  ThreadPool pool(1);
  auto ops = CudaOps::create(pool, CudaOptions{0, size_t{1} << 20});
  ASSERT_TRUE(ops.has_value()) << ops.status().to_string();
  RandomWeight w = random_weight(WeightFormat::kFP8, 2048, 1024, 1);  // 2 MiB of weights
  auto x = random_rows(1024, 2);
  Rows y(2048);
  (*ops)->linear({x.data(), 1, 1024}, w.view, {y.data(), 1, 2048}, true);
  EXPECT_EQ((*ops)->status().code(), StatusCode::kResourceExhausted)
      << (*ops)->status().to_string();
  // Later ops do nothing once an error is latched.
  (*ops)->fake_quant_fp8({x.data(), 1, 1024}, 32);
  EXPECT_FALSE((*ops)->status().ok());
}

TEST(CudaOpsErrors, NoDeviceIsAStatus) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) GTEST_SKIP() << "a device is present";
  ThreadPool pool(1);
  auto ops = CudaOps::create(pool, CudaOptions{});
  EXPECT_FALSE(ops.has_value());
}

}  // namespace
}  // namespace di::backend::testing
