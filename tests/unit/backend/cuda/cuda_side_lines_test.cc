// Side lines (Ops::begin_side) on the CUDA backend: ops on the second stream give the results of
// the same ops in issue order, eagerly and inside a segment (its eager run, its capture and
// replays of a graph that forks and joins); a download joins an open side line; memory freed while
// one is open is not handed out again before the join.
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

struct SideCase {
  int64_t rows = 3, in = 512, out = 256;
  RandomWeight w1 = random_weight(WeightFormat::kFP8, 256, 512, 5);
  RandomWeight w2 = random_weight(WeightFormat::kBF16, 256, 512, 6);
  Rows x = random_rows(3 * 512, 7);
  Rows y1, y2, z;  // the CPU's in-order results
  explicit SideCase(const CpuOps& cpu)
      : y1(static_cast<size_t>(rows * out)), y2(y1.size()), z(y1.size()) {
    cpu.linear({x.data(), rows, in}, w1.view, {y1.data(), rows, out}, true);
    cpu.linear({x.data(), rows, in}, w2.view, {y2.data(), rows, out}, true);
    cpu.add_round_bf16({y1.data(), rows, out}, {y2.data(), rows, out}, {z.data(), rows, out});
  }
};

TEST_F(CudaOpsTest, SideLineGivesTheInOrderResults) {
  const SideCase c(cpu_);
  Buffer x(*gpu_, c.rows, c.in), y1(*gpu_, c.rows, c.out), y2(*gpu_, c.rows, c.out),
      z(*gpu_, c.rows, c.out);
  x.from_host(c.x.data());
  const int64_t side_before = gpu_->side_lines();
  const Ops::SegmentStats seg_before = gpu_->segment_stats();
  // Run 0 is the segment's eager run, run 1 its capture, runs 2-4 replays.
  for (int run = 0; run < 5; ++run) {
    gpu_->fill(z.data(), 0.0f, c.rows * c.out);
    if (gpu_->begin_segment(0x51de0001)) {
      ASSERT_TRUE(gpu_->begin_side());
      {
        Buffer tmp(*gpu_, c.rows, c.in);  // allocated and freed on the side line
        gpu_->copy(x.data(), tmp.data(), c.rows * c.in);
        gpu_->linear(tmp.view(), c.w1.view, y1.view(), true);
      }
      gpu_->end_side();
      gpu_->linear(x.view(), c.w2.view, y2.view(), true);
      gpu_->join_side();
      gpu_->add_round_bf16(y1.view(), y2.view(), z.view());
      gpu_->end_segment();
    }
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    expect_bitwise(z.to_host(), c.z, "side line in a segment");
  }
  const Ops::SegmentStats seg = gpu_->segment_stats();
  EXPECT_EQ(gpu_->side_lines() - side_before, 2);  // the replays fork inside their graph
  EXPECT_EQ(seg.captured - seg_before.captured, 1);
  EXPECT_EQ(seg.replayed - seg_before.replayed, 3);
}

TEST_F(CudaOpsTest, DownloadJoinsAnOpenSideLine) {
  const SideCase c(cpu_);
  Buffer x(*gpu_, c.rows, c.in), y1(*gpu_, c.rows, c.out), y2(*gpu_, c.rows, c.out);
  x.from_host(c.x.data());
  // Back on the main line, not joined: the download waits for the side line's product.
  ASSERT_TRUE(gpu_->begin_side());
  gpu_->linear(x.view(), c.w1.view, y1.view(), true);
  gpu_->end_side();
  expect_bitwise(y1.to_host(), c.y1, "after end_side");
  // Still on the side line.
  ASSERT_TRUE(gpu_->begin_side());
  gpu_->linear(x.view(), c.w2.view, y2.view(), true);
  expect_bitwise(y2.to_host(), c.y2, "on the side line");
  gpu_->end_side();
  gpu_->join_side();  // nothing open any more: harmless
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
}

TEST_F(CudaOpsTest, MemoryFreedOnAnOpenSideLineWaitsForTheJoin) {
  ASSERT_TRUE(gpu_->begin_side());
  const float* first = nullptr;
  {
    Buffer a(*gpu_, 1, 1 << 18);
    first = a.data();
  }
  // The stream-ordered pool hands a block freed on a stream straight back to that stream; a block
  // the side line (or the main line) may still read must not come back before the join.
  Buffer b(*gpu_, 1, 1 << 18);
  EXPECT_NE(b.data(), first);
  gpu_->end_side();
  Buffer m(*gpu_, 1, 1 << 18);
  EXPECT_NE(m.data(), first);
  gpu_->join_side();
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
}

// The CPU backend has no side lines: begin_side says so, and the ops run in issue order.
TEST_F(CudaOpsTest, CpuBackendHasNoSideLines) {
  EXPECT_FALSE(cpu_.begin_side());
  EXPECT_EQ(cpu_.side_lines(), 0);
}

}  // namespace
}  // namespace di::backend::testing
