// The sparse attention kernel tests' shared problems (cuda_sparse_attention_fp8_test.cc and
// cuda_sparse_attention_gather_test.cc): the fixture, random KV rows and their host decoders,
// random queries and key lists, and the shapes of the bitwise comparisons.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/sparse_attention_fp8.h"
#include "tensor/numeric.h"

namespace di::backend::cuda {
namespace {

constexpr int D = kKvDim, H = kAttnHeads;

class SparseAttentionFp8Test : public ::testing::Test {
 public:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  }
  void TearDown() override {
    for (void* p : ptrs_) cudaFree(p);
  }
  template <class T>
  T* upload(const std::vector<T>& h) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, h.size() * sizeof(T))), cudaSuccess);
    ptrs_.push_back(p);
    if (!h.empty()) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  // Runs args with each sm_90a kernel forced (2: two warpgroups, 3: the warp-specialised seesaw
  // kernel); true when the device lacks them or the output bits of both equal `expect` (args.out
  // is overwritten; poisoned before each run).
  bool wgmma_bits(SparseAttentionFp8Args args, const std::vector<uint16_t>& expect) {
    bool same = true;
    for (int kernel : {2, 3}) {
      args.wgmma = kernel;
      args.split = 1;
      EXPECT_EQ(cudaMemset(args.out, 0xff, expect.size() * 2), cudaSuccess);
      const cudaError_t e = sparse_attention_fp8(args, nullptr);
      if (e == cudaErrorNotSupported) return true;
      EXPECT_EQ(e, cudaSuccess) << "kernel " << kernel;
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "kernel " << kernel;
      const bool eq = download(args.out, expect.size()) == expect;
      if (!eq) ADD_FAILURE() << "sm_90a kernel " << kernel << " differs";
      same = same && eq;
    }
    return same;
  }
  // Runs args on the one-block kernel with the given PV tiles (1: row groups, 2: all heads) and
  // heads per block; true when its output bits equal `expect` (args.out is overwritten).
  bool pv_tiles_bits(SparseAttentionFp8Args args,
                     int pv_tiles,
                     int heads,
                     const std::vector<uint16_t>& expect) {
    args.wgmma = 1;
    args.split = 1;
    args.pv_tiles = pv_tiles;
    args.heads_per_block = heads;
    EXPECT_EQ(cudaMemset(args.out, 0xff, expect.size() * 2), cudaSuccess);
    EXPECT_EQ(sparse_attention_fp8(args, nullptr), cudaSuccess);
    return download(args.out, expect.size()) == expect;
  }
  std::vector<void*> ptrs_;
};

// Random bf16 rows, some zero blocks, per-row magnitudes: `extreme` from 1e-7 (amax floors,
// subnormal codes) to 1e4 for the writers; else 0.05 to 3 (the KV is RMS-normed; with much
// larger keys the logits' own fp32 rounding, on either backend, decides the softmax).
inline std::vector<uint16_t> random_kv_rows(int64_t n, uint32_t seed, bool extreme) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const float extreme_mags[] = {1e-7f, 1e-3f, 0.05f, 1.0f, 1.0f, 1.0f, 30.0f, 1e4f};
  const float normal_mags[] = {0.05f, 0.25f, 0.5f, 1.0f, 1.0f, 1.0f, 2.0f, 3.0f};
  const float* mags = extreme ? extreme_mags : normal_mags;
  std::vector<uint16_t> v(static_cast<size_t>(n * D));
  for (int64_t r = 0; r < n; ++r) {
    const float m = mags[rng() % 8];
    for (int i = 0; i < D; ++i) {
      const bool zero_block = (r % 5 == 1) && (i / 32) == 3;
      v[static_cast<size_t>(r * D + i)] = float_to_bf16(zero_block ? 0.0f : d(rng) * m);
    }
  }
  return v;
}

// Host decoders of the stored formats (independent of the device decoder).
inline void decode_fp8_row(const uint8_t* row, float* out) {
  for (int i = 0; i < D; ++i) out[i] = e4m3_to_float(row[i]) * e8m0_to_float(row[512 + i / 32]);
}
inline void decode_fp4_row(const uint8_t* row, float* out) {
  for (int i = 0; i < D; ++i) {
    const uint8_t code = (row[i / 2] >> (4 * (i % 2))) & 0xf;
    out[i] = e2m1_to_float(code) * e4m3_to_float(row[256 + i / 16]);
  }
}

struct Problem {
  int64_t T = 0;
  int win = 0, extra = 0;
  int64_t pool8 = 0, pool4 = 0;
  std::vector<uint16_t> q;  // [T, 64, 512]
  std::vector<int32_t> idx, extra_idx;
  std::vector<float> sink;
};

inline Problem make_problem(int64_t T, int win, int extra, uint32_t seed) {
  Problem p;
  p.T = T;
  p.win = win;
  p.extra = extra;
  p.pool8 = 400;
  p.pool4 = 700;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  p.q.resize(static_cast<size_t>(T * H * D));
  for (int64_t i = 0; i < T * H; ++i) {
    const float m = (i % 3 == 0) ? 4.0f : 1.0f;  // some heads with sharp softmax
    for (int k = 0; k < D; ++k) p.q[static_cast<size_t>(i * D + k)] = float_to_bf16(d(rng) * m);
  }
  auto fill = [&](std::vector<int32_t>& v, int n, int64_t pool) {
    v.resize(static_cast<size_t>(T * n));
    for (auto& x : v) x = (rng() % 10 == 0) ? -1 : static_cast<int32_t>(rng() % pool);
  };
  fill(p.idx, win, p.pool8);
  fill(p.extra_idx, extra, p.pool4);
  if (T > 1) {  // query 1: no keys at all (sink only); query 0: a single window key
    for (int i = 0; i < win; ++i) p.idx[static_cast<size_t>(win + i)] = -1;
    for (int i = 0; i < extra; ++i) p.extra_idx[static_cast<size_t>(extra + i)] = -1;
    for (int i = 1; i < win; ++i) p.idx[static_cast<size_t>(i)] = -1;
  }
  p.sink.resize(H);
  for (auto& s : p.sink) s = d(rng);
  return p;
}

struct DeviceProblem {
  uint8_t *kv = nullptr, *extra_kv = nullptr;
  std::vector<uint8_t> kv_host, extra_host;
  SparseAttentionFp8Args args;
};

inline DeviceProblem upload_problem(SparseAttentionFp8Test* t, const Problem& p, uint32_t seed) {
  DeviceProblem dp;
  const auto rows8 = random_kv_rows(p.pool8, seed, false);
  const auto rows4 = random_kv_rows(p.pool4, seed + 1, false);
  std::vector<int32_t> s8(static_cast<size_t>(p.pool8)), s4(static_cast<size_t>(p.pool4));
  for (size_t i = 0; i < s8.size(); ++i) s8[i] = static_cast<int32_t>(i);
  for (size_t i = 0; i < s4.size(); ++i) s4[i] = static_cast<int32_t>(i);
  dp.kv = t->upload(std::vector<uint8_t>(static_cast<size_t>(p.pool8 * kKvFp8RowBytes)));
  dp.extra_kv = t->upload(std::vector<uint8_t>(static_cast<size_t>(p.pool4 * kKvFp4RowBytes)));
  EXPECT_EQ(write_kv_fp8(t->upload(rows8), p.pool8, t->upload(s8), dp.kv, nullptr), cudaSuccess);
  EXPECT_EQ(write_kv_fp4(t->upload(rows4), p.pool4, t->upload(s4), dp.extra_kv, nullptr),
            cudaSuccess);
  dp.kv_host = t->download(dp.kv, static_cast<size_t>(p.pool8 * kKvFp8RowBytes));
  dp.extra_host = t->download(dp.extra_kv, static_cast<size_t>(p.pool4 * kKvFp4RowBytes));
  SparseAttentionFp8Args& a = dp.args;
  a.q = t->upload(p.q);
  a.num_queries = p.T;
  a.kv = dp.kv;
  a.indices = t->upload(p.idx);
  a.num_indices = p.win;
  a.extra_kv = dp.extra_kv;
  a.extra_indices = t->upload(p.extra_idx);
  a.num_extra = p.extra;
  a.sink = t->upload(p.sink);
  a.softmax_scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.out = t->upload(std::vector<uint16_t>(static_cast<size_t>(p.T * H * D), 0x7fc1));  // NaN
  a.workspace_bytes = sparse_attention_fp8_workspace_bytes(p.T, p.win + p.extra);
  a.workspace = t->upload(std::vector<uint8_t>(a.workspace_bytes, 0xff));  // NaN logits
  return dp;
}

// The shapes of the bitwise kernel comparisons: mixed FP8/FP4 key blocks, partial and empty
// blocks, empty slots, no keys, many blocks and several batch sizes; from 133 queries the seesaw
// kernel's blocks run several queries each (one block per SM), with even, odd (the owner of a
// query's first key block alternates) and single key blocks.
struct BitwiseCase {
  int64_t T;
  int win, extra;
};
constexpr BitwiseCase kBitwiseCases[] = {
    {1, 128, 512}, {2, 70, 33},     {7, 0, 100},    {3, 128, 0}, {2, 1, 1},
    {40, 64, 64},  {5, 200, 300},   {2, 128, 2048}, {3, 0, 0},   {133, 128, 512},
    {9, 100, 4},   {300, 128, 448}, {290, 100, 4},  {277, 1, 60}};

// Case c's problem on the device, set up for the one-block mma.sync kernel at 64 heads per block
// (the reference of the bitwise comparisons); seed 2 also reads rows >= 200 through fresh_kv
// (the same bytes).
inline DeviceProblem upload_bitwise_case(SparseAttentionFp8Test* t,
                                         const Problem& p,
                                         const BitwiseCase& c,
                                         uint32_t seed) {
  DeviceProblem dp = upload_problem(t, p, seed + static_cast<uint32_t>(c.extra));
  if (seed == 2 && p.pool8 > 200) {
    dp.args.fresh_from = 200;
    dp.args.fresh_kv = dp.kv + 200 * kKvFp8RowBytes;
  }
  dp.args.split = 1;
  dp.args.wgmma = 1;
  dp.args.heads_per_block = 64;
  return dp;
}

// Case c with `seed` on the device (upload_bitwise_case) and its output bits on the mma.sync
// kernel, the reference of the bitwise comparisons.
struct BitwiseReference {
  Problem p;
  DeviceProblem dp;
  std::vector<uint16_t> bits;
};
inline BitwiseReference bitwise_reference(SparseAttentionFp8Test* t,
                                          const BitwiseCase& c,
                                          uint32_t seed) {
  BitwiseReference r;
  r.p = make_problem(c.T, c.win, c.extra, seed * 7 + static_cast<uint32_t>(c.T));
  r.dp = upload_bitwise_case(t, r.p, c, seed);
  EXPECT_EQ(sparse_attention_fp8(r.dp.args, nullptr), cudaSuccess);
  r.bits = t->download(r.dp.args.out, static_cast<size_t>(r.p.T * H * D));
  return r;
}

}  // namespace
}  // namespace di::backend::cuda
