// The indexer's selections on the device (index_topk, candidate_blocks, paged_rows) against
// CpuOps: identical lists, on exact ties (few distinct values, -inf, -0.0 vs +0.0), long rows (a
// 64K-token context at ratio 1) and rows with nothing visible.
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

using Ints = ManagedVector<int32_t>;

Rows select_scores(int64_t rows, int64_t keys, uint32_t seed, bool tied) {
  Rows s = random_rows(static_cast<size_t>(rows * keys), seed);
  if (tied) {
    std::mt19937 rng(seed);
    const float values[] = {-INFINITY, -1.5f, -0.0f, 0.0f, 0.25f, 3.0f, 7.5f, 7.5f};
    std::uniform_int_distribution<int> pick(0, 7);
    for (auto& x : s) x = values[pick(rng)];
  }
  return s;
}

std::vector<int64_t> visible_counts(int64_t rows, int64_t keys, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, keys);
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (auto& x : v) x = d(rng);
  v[0] = keys;
  if (rows > 1) v[1] = 0;
  return v;
}

void expect_same_lists(const Ints& gpu, const Ints& cpu, const char* what) {
  sync();
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_EQ(gpu[i], cpu[i]) << what << ": element " << i;
  }
}

struct TopkCase {
  int64_t rows, keys;
  int topk;
  bool tied;
};

TEST_F(CudaOpsTest, IndexTopkMatchesCpu) {
  for (const TopkCase& c : {TopkCase{9, 300, 16, true}, TopkCase{9, 300, 16, false},
                            TopkCase{5, 5000, 512, true}, TopkCase{4, 65536, 512, false},
                            TopkCase{3, 65536, 512, true}, TopkCase{6, 700, 2048, false}}) {
    const Rows s = select_scores(c.rows, c.keys, static_cast<uint32_t>(c.keys + c.topk), c.tied);
    const auto vis = visible_counts(c.rows, c.keys, 7);
    IndexTopkArgs a;
    a.scores = s.data();
    a.num_queries = c.rows;
    a.num_keys = c.keys;
    a.num_visible = vis.data();
    a.topk = c.topk;
    a.width = c.topk + 3;  // wider than any row: the padding is checked too
    Ints cpu(static_cast<size_t>(c.rows * a.width), 99), gpu(cpu.size(), 77);
    a.selected = cpu.data();
    cpu_.index_topk(a);
    a.selected = gpu.data();
    gpu_->index_topk(a);
    expect_same_lists(gpu, cpu, "index_topk");
  }
}

TEST_F(CudaOpsTest, CandidateBlocksAndMaskedTopkMatchCpu) {
  for (const TopkCase& c :
       {TopkCase{7, 200, 6, true}, TopkCase{5, 20000, 512, false}, TopkCase{4, 65536, 512, true}}) {
    const int block_size = 8, topk_blocks = c.keys > 1000 ? 2048 : 5;
    const Rows s = select_scores(c.rows, c.keys, static_cast<uint32_t>(c.keys), c.tied);
    const auto vis = visible_counts(c.rows, c.keys, 9);
    CandidateBlockArgs b;
    b.scores = s.data();
    b.num_queries = c.rows;
    b.num_keys = c.keys;
    b.num_visible = vis.data();
    b.block_size = block_size;
    b.topk_blocks = topk_blocks;
    b.width = topk_blocks;
    Ints cpu_blocks(static_cast<size_t>(c.rows * b.width), 99), gpu_blocks(cpu_blocks.size(), 77);
    b.blocks = cpu_blocks.data();
    cpu_.candidate_blocks(b);
    b.blocks = gpu_blocks.data();
    gpu_->candidate_blocks(b);
    expect_same_lists(gpu_blocks, cpu_blocks, "candidate_blocks");

    // A later index layer's top-k inside those blocks (its own scores, same entry space).
    const Rows s2 = select_scores(c.rows, c.keys, static_cast<uint32_t>(c.keys + 1), c.tied);
    IndexTopkArgs a;
    a.scores = s2.data();
    a.num_queries = c.rows;
    a.num_keys = c.keys;
    a.num_visible = vis.data();
    a.topk = c.topk;
    a.blocks = cpu_blocks.data();
    a.num_blocks = b.width;
    a.block_size = block_size;
    a.width = c.topk;
    Ints cpu(static_cast<size_t>(c.rows * a.width), 99), gpu(cpu.size(), 77);
    a.selected = cpu.data();
    cpu_.index_topk(a);
    a.selected = gpu.data();
    gpu_->index_topk(a);
    expect_same_lists(gpu, cpu, "index_topk in candidate blocks");
  }
}

TEST_F(CudaOpsTest, PagedRowsMatchCpu) {
  const int64_t rows = 11;
  const int width = 37, per = 8;
  std::mt19937 rng(5);
  std::vector<int32_t> pages(60);
  for (auto& p : pages) p = std::uniform_int_distribution<int32_t>(0, 500)(rng);
  std::vector<int64_t> offset(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) offset[static_cast<size_t>(r)] = (r % 3) * 20;
  Ints entries(static_cast<size_t>(rows * width));
  for (auto& e : entries) e = std::uniform_int_distribution<int32_t>(-3, 20 * per - 1)(rng);
  for (auto& e : entries) e = std::max(e, -1);
  PagedRowsArgs a;
  a.entries = entries.data();
  a.num_rows = rows;
  a.width = width;
  a.pages = pages.data();
  a.num_pages = static_cast<int64_t>(pages.size());
  a.page_offset = offset.data();
  a.entries_per_page = per;
  Ints cpu(entries.size(), 99), gpu(entries.size(), 77);
  a.out = cpu.data();
  cpu_.paged_rows(a);
  a.out = gpu.data();
  gpu_->paged_rows(a);
  expect_same_lists(gpu, cpu, "paged_rows");
}

TEST_F(CudaOpsTest, ArgmaxRowsMatchCpu) {
  // Vocabulary-wide rows with planted exact ties of the maximum, and a row of -inf only.
  const int64_t rows = 9, cols = 129280;
  Rows x = random_rows(static_cast<size_t>(rows * cols), 77);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * cols;
    const float top = 100.0f + static_cast<float>(r % 3);
    for (int64_t j : {cols - 1 - r * 1000, 7 * r + 5, cols / 2 + r}) row[j] = top;
  }
  for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(4 * cols + j)] = -INFINITY;
  std::vector<int32_t> cpu(static_cast<size_t>(rows), -1), gpu(cpu.size(), -2);
  cpu_.argmax_rows({x.data(), rows, cols}, cpu.data());
  gpu_->argmax_rows({x.data(), rows, cols}, gpu.data());
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  EXPECT_EQ(gpu, cpu);
  EXPECT_EQ(cpu[4], 0);
}

}  // namespace
}  // namespace di::backend::testing
