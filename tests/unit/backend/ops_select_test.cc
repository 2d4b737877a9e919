// The indexer's selection rules (kernels/ref/index_select.h) against a plain full sort, and
// CpuOps' fixed-width lists (padding, candidate-block masking, page mapping) built on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "kernels/ref/index_select.h"

namespace di::backend {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Scores drawn from a few values (many exact ties), with -inf, -0.0 and +0.0 among them.
std::vector<float> tied_scores(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const float values[] = {-kInf, -1.5f, -0.0f, 0.0f, 0.25f, 0.25f, 3.0f, 7.5f};
  std::uniform_int_distribution<int> pick(0, 7);
  std::vector<float> v(n);
  for (auto& x : v) x = values[pick(rng)];
  return v;
}

// The definition: stable sort by score descending (ties keep index order), first k, ascending.
std::vector<int32_t> sorted_topk(const std::vector<float>& s, int64_t vis, int k) {
  std::vector<int32_t> order(static_cast<size_t>(vis));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(k)));
  std::sort(order.begin(), order.end());
  return order;
}

TEST(IndexSelect, TopkIsTheStableSortsFirstK) {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const auto s = tied_scores(300, seed);
    for (int64_t vis : {0, 1, 7, 64, 300}) {
      for (int k : {0, 1, 5, 64, 512}) {
        EXPECT_EQ(kernels::select_topk(s.data(), vis, k), sorted_topk(s, vis, k))
            << "seed " << seed << " visible " << vis << " k " << k;
      }
    }
  }
}

TEST(IndexSelect, CandidateBlocksPinTheNewestAndSkipEmptyBlocks) {
  // Blocks of 4: block 0 best 5, block 1 all -inf, block 2 best 9, block 3 (newest, partial).
  const std::vector<float> s = {1, 5, 0, 2, -kInf, -kInf, -kInf, -kInf, 9, 0, 0, 0, -3};
  EXPECT_EQ(kernels::select_candidate_blocks(s.data(), 13, 4, 2), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(kernels::select_candidate_blocks(s.data(), 13, 4, 3), (std::vector<int32_t>{0, 2, 3}));
  // Block 1 has no finite score: never kept, even with room.
  EXPECT_EQ(kernels::select_candidate_blocks(s.data(), 13, 4, 10), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_TRUE(kernels::select_candidate_blocks(s.data(), 0, 4, 10).empty());
}

class CpuSelectOps : public ::testing::Test {
 protected:
  ThreadPool pool_{2};
  CpuOps ops_{pool_};
};

TEST_F(CpuSelectOps, IndexTopkMasksEntriesOutsideTheRowsBlocks) {
  const int64_t rows = 3, keys = 40;
  const int width = 6, topk = 6, block_size = 4;
  std::vector<float> scores(static_cast<size_t>(rows * keys));
  std::iota(scores.begin(), scores.end(), 0.0f);  // later entries score higher
  const std::vector<int64_t> visible = {40, 10, 0};
  // Row 0 may use blocks 1 and 3 only; row 1 block 0; row 2 none.
  const std::vector<int32_t> blocks = {1, 3, 0, -1, -1, -1};
  std::vector<int32_t> out(static_cast<size_t>(rows * width), 99);
  IndexTopkArgs a;
  a.scores = scores.data();
  a.num_queries = rows;
  a.num_keys = keys;
  a.num_visible = visible.data();
  a.topk = topk;
  a.blocks = blocks.data();
  a.num_blocks = 2;
  a.block_size = block_size;
  a.selected = out.data();
  a.width = width;
  ops_.index_topk(a);
  // Row 0: blocks 1 and 3 hold entries 4-7 and 12-15: the best six are 6, 7, 12..15.
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 6),
            (std::vector<int32_t>{6, 7, 12, 13, 14, 15}));
  // Row 1: block 0 (entries 0-3) wins, then masked entries by index (-inf ties: lowest first).
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 6, out.begin() + 12),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 12, out.end()), std::vector<int32_t>(6, -1));
}

TEST_F(CpuSelectOps, PagedRowsMapEntriesThroughEachRowsTable) {
  const std::vector<int32_t> entries = {0, 5, 9, -1, 3, 2, -1, -1};
  const std::vector<int32_t> pages = {7, 2, 5, 1};  // row 0: pages 7, 2, 5; row 1: page 1
  const std::vector<int64_t> offset = {0, 3};
  std::vector<int32_t> out(entries.size(), 99);
  PagedRowsArgs a;
  a.entries = entries.data();
  a.num_rows = 2;
  a.width = 4;
  a.pages = pages.data();
  a.num_pages = 4;
  a.page_offset = offset.data();
  a.entries_per_page = 4;
  a.out = out.data();
  ops_.paged_rows(a);
  EXPECT_EQ(out, (std::vector<int32_t>{28, 9, 21, -1, 7, 6, -1, -1}));
}

TEST_F(CpuSelectOps, ArgmaxRowsTakeTheFirstLargest) {
  const std::vector<float> x = {1,     3,     3,     -1,     //
                                -kInf, -kInf, -kInf, -kInf,  //
                                0.0f,  -0.0f, -2,    -3};
  std::vector<int32_t> out(3, -7);
  ops_.argmax_rows({x.data(), 3, 4}, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 0, 0}));
}

}  // namespace
}  // namespace di::backend
