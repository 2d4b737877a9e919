// Programmatic dependent launch (grid_dependency.cuh): every kernel may be scheduled while the
// previous one in its stream still runs, and waits for it before touching memory. A chain of
// launches that read what the previous one wrote and overwrite what it read (rms_norm x -> y,
// y *= 0.75 in place, x = bf16(x + y)) must give the bits of the same chain run one kernel at a
// time, launched back to back and replayed as a CUDA graph (programmatic edges). A kernel that
// read its input before the wait would see a half-written x or y and change the result.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

constexpr int64_t kRows = 64, kCols = 4096, kN = kRows * kCols;
constexpr int kIterations = 200;

class GridDependencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    for (float** p : {&x_, &y_, &w_}) ASSERT_EQ(cudaMalloc(p, sizeof(float) * kN), cudaSuccess);
    const Rows w = random_rows(kCols, 7);
    ASSERT_EQ(cudaMemcpy(w_, w.data(), sizeof(float) * kCols, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void TearDown() override {
    for (float* p : {x_, y_, w_}) (void)cudaFree(p);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  void reset() {
    const Rows x = random_rows(kN, 11);
    ASSERT_EQ(cudaMemcpy(x_, x.data(), sizeof(float) * kN, cudaMemcpyHostToDevice), cudaSuccess);
  }
  // One iteration's three launches; with `each_alone` the host waits after every kernel.
  void iterate(bool each_alone) {
    auto step = [&](cudaError_t e) {
      ASSERT_EQ(e, cudaSuccess);
      if (each_alone) {
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      }
    };
    step(cuda::rms_norm(x_, kRows, kCols, w_, 1e-6f, y_, stream_));
    step(cuda::scale_round_bf16(y_, kN, 0.75f, stream_));
    step(cuda::add_round_bf16(x_, y_, kN, x_, stream_));
  }
  std::vector<float> result() {
    std::vector<float> x(kN);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(x.data(), x_, sizeof(float) * kN, cudaMemcpyDeviceToHost), cudaSuccess);
    return x;
  }
  cudaStream_t stream_ = nullptr;
  float *x_ = nullptr, *y_ = nullptr, *w_ = nullptr;
};

TEST_F(GridDependencyTest, OverlappedLaunchesGiveTheBitsOfSerialOnes) {
  reset();
  for (int i = 0; i < kIterations; ++i) iterate(true);
  const std::vector<float> serial = result();

  reset();
  for (int i = 0; i < kIterations; ++i) iterate(false);
  const std::vector<float> streamed = result();
  EXPECT_EQ(std::memcmp(streamed.data(), serial.data(), sizeof(float) * kN), 0)
      << "launched back to back";

  reset();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int i = 0; i < kIterations; ++i) iterate(false);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  const std::vector<float> replayed = result();
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  EXPECT_EQ(std::memcmp(replayed.data(), serial.data(), sizeof(float) * kN), 0)
      << "replayed as a graph";
  // The chain did move the values (a no-op chain would pass trivially).
  reset();
  const std::vector<float> start = result();
  EXPECT_NE(std::memcmp(start.data(), serial.data(), sizeof(float) * kN), 0);
}

}  // namespace
}  // namespace di::backend::testing
