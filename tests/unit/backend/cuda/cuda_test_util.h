// Shared pieces of the CUDA backend tests: a CudaOps next to a CpuOps (or a skip when the machine
// has no device), random weights in every storage format, and bitwise / near-bitwise comparison.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "tensor/numeric.h"

namespace di::backend::testing {

// CUDA managed memory: valid on the host and the device. CudaOps takes device pointers for
// activations and CpuOps host ones, so the tests hand both the same managed arrays. CudaOps does
// not wait for its stream, so read a GPU result only after sync() (the expect_* helpers do).
template <class T>
struct Managed {
  using value_type = T;
  Managed() = default;
  template <class U>
  Managed(const Managed<U>&) {}  // NOLINT
  T* allocate(size_t n) {
    void* p = nullptr;
    if (cudaMallocManaged(&p, sizeof(T) * std::max<size_t>(n, 1)) != cudaSuccess) {
      throw std::bad_alloc();
    }
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { (void)cudaFree(p); }
  template <class U>
  bool operator==(const Managed<U>&) const {
    return true;
  }
};
template <class T>
using ManagedVector = std::vector<T, Managed<T>>;
using Rows = ManagedVector<float>;

inline void sync() {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

class CudaOpsTest : public ::testing::Test {
 protected:
  // The backend's options (a fixture of the tensor path overrides this).
  virtual CudaOptions options() const { return CudaOptions{0, size_t{512} << 20}; }
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    auto ops = CudaOps::create(pool_, options());
    ASSERT_TRUE(ops.has_value()) << ops.status().to_string();
    gpu_ = std::move(ops).value();
  }
  void TearDown() override {
    if (gpu_) {
      EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    }
  }
  ThreadPool pool_{2};
  CpuOps cpu_{pool_};
  std::unique_ptr<CudaOps> gpu_;
};

inline Rows random_rows(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Rows v(n);
  for (auto& x : v) x = round_bf16(d(rng));
  return v;
}

// The same values in plain host memory, for tests that upload through their own buffers.
inline std::vector<float> host_rows(size_t n, uint32_t seed, float scale = 1.0f) {
  const Rows r = random_rows(n, seed, scale);
  return std::vector<float>(r.begin(), r.end());
}

struct RandomWeight {
  WeightView view;
  std::vector<uint8_t> data, scale;
};

inline RandomWeight random_weight(WeightFormat f, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomWeight w;
  w.view = {f, out, in, nullptr, nullptr};
  auto bytes = [&](size_t n, auto pick) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = pick();
    return v;
  };
  std::uniform_int_distribution<int> any(0, 255), exp(118, 124);
  switch (f) {
    case WeightFormat::kFP8:
      w.data = bytes(static_cast<size_t>(out * in), [&] {
        int b = any(rng);
        return static_cast<uint8_t>((b & 0x7f) == 0x7f ? b - 1 : b);  // no NaN codes
      });
      w.scale = bytes(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)),
                      [&] { return static_cast<uint8_t>(exp(rng)); });
      break;
    case WeightFormat::kFP4:
      w.data =
          bytes(static_cast<size_t>(out * in / 2), [&] { return static_cast<uint8_t>(any(rng)); });
      w.scale =
          bytes(static_cast<size_t>(out * in / 32), [&] { return static_cast<uint8_t>(exp(rng)); });
      break;
    case WeightFormat::kBF16: {
      auto v = random_rows(static_cast<size_t>(out * in), seed, 0.05f);
      w.data.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = float_to_bf16(v[i]);
        std::memcpy(w.data.data() + 2 * i, &h, 2);
      }
      break;
    }
    case WeightFormat::kF32: {
      auto v = random_rows(static_cast<size_t>(out * in), seed, 0.05f);
      w.data.resize(v.size() * 4);
      std::memcpy(w.data.data(), v.data(), w.data.size());
      break;
    }
  }
  w.view.data = w.data.data();
  w.view.scale = w.scale.empty() ? nullptr : w.scale.data();
  return w;
}

// ||got - ref|| / ||ref|| over all elements.
template <class A, class B>
double relative_error(const A& got, const B& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Bitwise equality, with the first differing element reported.
template <class A, class B>
void expect_bitwise(const A& gpu, const B& cpu, const char* what) {
  sync();
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (float_bits(gpu[i]) != float_bits(cpu[i])) {
      ADD_FAILURE() << what << ": element " << i << ": gpu " << gpu[i] << " cpu " << cpu[i];
      return;
    }
  }
}

// For ops whose only difference can be a transcendental function's last-bit rounding (glibc's
// fp32 exp/sin/cos against the GPU's correctly rounded ones): at least `min_equal` of the
// elements bitwise equal, and every element within `rel` of the CPU value.
template <class A, class B>
void expect_nearly_bitwise(
    const A& gpu, const B& cpu, double min_equal, double rel, const char* what) {
  sync();
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  size_t equal = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (float_bits(gpu[i]) == float_bits(cpu[i])) {
      ++equal;
      continue;
    }
    ASSERT_LE(std::fabs(gpu[i] - cpu[i]), rel * std::fabs(cpu[i]) + 1e-30)
        << what << ": element " << i << ": gpu " << gpu[i] << " cpu " << cpu[i];
  }
  EXPECT_GE(static_cast<double>(equal), min_equal * static_cast<double>(gpu.size()))
      << what << ": " << equal << " of " << gpu.size() << " bitwise equal";
}

}  // namespace di::backend::testing
