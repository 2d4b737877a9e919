// A weight's first use uploads it and runs the op right away: the upload must be ordered before
// the op's kernels. It once went through cudaMemcpy, on the legacy default stream, which the op
// streams (non-blocking) do not wait for and which, from pageable memory, may return before its
// DMA lands: a kernel then read a partly uploaded weight (the mix product's fn, whose copy into
// shared memory starts before the kernel waits for its predecessor), and greedy tokens on the
// full-width model differed between processes (docs/notes/cuda-kernels.md, "The determinism
// defect").
#include <cstring>
#include <memory>

#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

// Weight bytes with |w| in [2^-9, 2^-1) from a cheap generator (several MB per test).
std::vector<uint8_t> weight_bytes(WeightFormat f, int64_t n, uint32_t seed) {
  const size_t width = f == WeightFormat::kBF16 ? 2 : 4;
  std::vector<uint8_t> v(static_cast<size_t>(n) * width);
  uint32_t state = seed;
  for (size_t i = 0; i < v.size(); i += width) {
    state = state * 1664525u + 1013904223u;
    const uint32_t bits =
        (state & 0x80000000u) | ((118u + (state >> 8) % 8) << 23) | (state & 0x7f0000u);
    const uint32_t stored = width == 2 ? bits >> 16 : bits;
    std::memcpy(v.data() + i, &stored, width);
  }
  return v;
}

// The mixes of few rows at V4.1's width (hc 4 x 5120: fn is 2 MB of f32), each round with a new
// fn, its first use (the upload) against its second (cached), bitwise. On the H200 the old
// upload failed 3 of 60 such rounds over 5 runs of the test (2 runs failed); 48 rounds a run.
TEST_F(CudaOpsTest, TheFirstUseOfAWeightSeesAllOfIt) {
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t rows = 12, hc_dim = hc * 5120;
  auto x = random_rows(static_cast<size_t>(rows * hc_dim), 61);
  auto base = random_rows(static_cast<size_t>(mix), 62, 0.5f);
  const float scale[3] = {0.7f, 1.1f, 2.3f};
  std::vector<std::vector<uint8_t>> fns;  // all kept: each round's fn at its own address
  for (int round = 0; round < 48; ++round) {
    fns.push_back(weight_bytes(WeightFormat::kF32, int64_t{mix} * hc_dim, 100 + round));
    const auto* fn = reinterpret_cast<const float*>(fns.back().data());
    ManagedVector<HcCoefficients> first(static_cast<size_t>(rows)), again(first.size());
    gpu_->hc_mixes({x.data(), rows, hc_dim}, fn, scale, base.data(), hc, 20, 1e-6f, 1e-6f,
                   first.data());
    gpu_->hc_mixes({x.data(), rows, hc_dim}, fn, scale, base.data(), hc, 20, 1e-6f, 1e-6f,
                   again.data());
    sync();
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    EXPECT_EQ(std::memcmp(first.data(), again.data(), sizeof(HcCoefficients) * rows), 0)
        << "round " << round << ": the first use of fn read other bits than the second";
  }
}

// Products on fresh weights of a few MB (the dense GEMV at 16K outputs, the staged kernel at
// V4.1's mix-product shape), each used once right after its upload, against the CPU, bitwise.
TEST_F(CudaOpsTest, ProductsOnAFreshWeightMatchCpuBitwise) {
  struct Shape {
    WeightFormat format;
    int64_t rows, out, in;
  };
  std::vector<std::vector<uint8_t>> weights;  // all kept: each at its own address
  for (int round = 0; round < 4; ++round) {
    for (const Shape& c :
         {Shape{WeightFormat::kBF16, 1, 16384, 512}, Shape{WeightFormat::kF32, 4, 24, 20480},
          Shape{WeightFormat::kBF16, 2, 16384, 1024}}) {
      weights.push_back(weight_bytes(c.format, c.out * c.in,
                                     static_cast<uint32_t>(200 + 7 * round + weights.size())));
      const WeightView w{c.format, c.out, c.in, weights.back().data(), nullptr};
      auto x = random_rows(static_cast<size_t>(c.rows * c.in), 100 + round);
      Rows cpu(static_cast<size_t>(c.rows * c.out)), gpu(cpu.size(), NAN);
      cpu_.linear({x.data(), c.rows, c.in}, w, {cpu.data(), c.rows, c.out}, false);
      gpu_->linear({x.data(), c.rows, c.in}, w, {gpu.data(), c.rows, c.out}, false);
      ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
      expect_bitwise(gpu, cpu, "first use of a weight");
    }
  }
}

}  // namespace
}  // namespace di::backend::testing
