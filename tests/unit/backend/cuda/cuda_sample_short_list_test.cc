// The sampling kernel's short list (sample_rows.cu: candidate buckets below the max, then the cuts
// and the race on the list) and its whole-row fallback, against CpuOps at the vocabulary width:
// k at the edges (1, 50, vocabulary - 1, vocabulary), ties at the top-k boundary, a top wider
// than the list (the fallback), top-p alone, min-p, temperature only, greedy rows among sampled
// ones, masks, penalties and bias; both kernel variants (1 and 2 rows per SM) and every team
// size (2-16 CTAs per row, a cluster) through the raw launcher; and every row drawn alone equals
// the same row drawn in the batch.
#include <algorithm>
#include <cstring>
#include <random>

#include "backend/cuda/sample_rows.h"
#include "cuda_test_util.h"
#include "kernels/ref/sample_math.h"
#include "sample_rows_input.h"

namespace di::backend::testing {
namespace {

namespace ks = kernels::sample;

constexpr int64_t kVocab = 129280;

struct Spec {
  float t;
  int32_t k;
  float p, min_p;
};

constexpr Spec kSpecs[] = {
    {0.8f, 50, 0.95f, 0.0f},     {0.8f, 1, 1.0f, 0.0f},          {0.8f, 50, 1.0f, 0.0f},
    {0.8f, kVocab, 0.95f, 0.0f}, {0.8f, kVocab - 1, 1.0f, 0.0f}, {0.8f, 0, 0.9f, 0.0f},
    {0.8f, 0, 1.0f, 0.05f},      {0.8f, 0, 1.0f, 0.0f},          {0.0f, 50, 0.95f, 0.0f},
    {0.05f, 50, 0.95f, 0.0f},    {2.0f, 300, 0.99f, 0.01f},      {1.0f, 0, 0.5f, 0.0f},
    {0.7f, 50, 0.9f, 0.1f},      {1.3f, 4000, 0.95f, 0.0f},      {0.8f, 0, 0.999f, 0.0f},
};
constexpr int kSpecCount = static_cast<int>(sizeof kSpecs / sizeof kSpecs[0]);

struct Batch : SampleRowsInput {
  Rows x;
  ks::RowsArgs args() const { return SampleRowsInput::args(kVocab); }
};

// Rows of five kinds per spec: plain (bf16-rounded normal, sd 3: many exact ties), the 40th
// largest value repeated at 30 more tokens (ties across k = 50), 5000 tokens sharing the max
// (more than the list holds), a mask with penalties and bias, and flat rows (sd 0.3: top-p alone
// keeps more tokens than the list holds, so the list shrinks to the crossing bucket).
Batch make_batch(uint32_t seed) {
  Batch b;
  const int64_t rows = 5 * kSpecCount;
  b.x = random_rows(static_cast<size_t>(rows * kVocab), seed, 3.0f);
  std::mt19937 rng(seed + 7);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(kVocab) - 1);
  const int64_t words = ks::mask_words(kVocab);
  for (int64_t r = 0; r < rows; ++r) {
    const Spec& s = kSpecs[r % kSpecCount];
    const int kind = static_cast<int>(r / kSpecCount);
    float* row = b.x.data() + r * kVocab;
    ks::RowParams p;
    p.key = ks::row_key(rng(), static_cast<uint64_t>(r), 5);
    p.temperature = s.t;
    p.top_k = s.k;
    p.top_p = s.p;
    p.min_p = s.min_p;
    if (kind == 4) {
      for (int64_t j = 0; j < kVocab; ++j) row[j] *= 0.1f;
    } else if (kind == 1) {
      std::vector<float> sorted(row, row + kVocab);
      std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
      for (int i = 0; i < 30; ++i) row[tok(rng)] = sorted[39];
    } else if (kind == 2) {
      const float top = *std::max_element(row, row + kVocab);
      for (int i = 0; i < 5000; ++i) row[tok(rng)] = top;
    } else if (kind == 3) {
      p.repetition_penalty = 1.2f;
      p.presence_penalty = 0.3f;
      p.penalty_begin = static_cast<int32_t>(b.penalty_tokens.size());
      std::vector<int32_t> distinct;
      for (int i = 0; i < 30; ++i) distinct.push_back(tok(rng));
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      for (int32_t t : distinct) {
        b.penalty_tokens.push_back(t);
        b.penalty_counts.push_back(static_cast<int32_t>(rng() % 3));
      }
      p.penalty_count = static_cast<int32_t>(distinct.size());
      p.bias_begin = static_cast<int32_t>(b.bias_tokens.size());
      for (auto [t, v] : {std::pair{5, 4.0f}, {tok(rng), 6.0f}, {5, -1.0f}}) {
        b.bias_tokens.push_back(t);
        b.bias_values.push_back(v);
      }
      p.bias_count = 3;
      p.mask = static_cast<int32_t>(b.masks.size() / static_cast<size_t>(words));
      for (int64_t w = 0; w < words; ++w) {
        uint32_t bits = 0;
        for (int k = 0; k < 32; ++k) bits |= ((w * 32 + k) % 3 == 0 ? 1u : 0u) << k;
        b.masks.push_back(bits);
      }
    }
    b.params.push_back(p);
  }
  return b;
}

template <class T>
ManagedVector<T> managed(const std::vector<T>& v) {
  return ManagedVector<T>(v.begin(), v.end());
}

TEST_F(CudaOpsTest, SampleRowsShortListMatchesCpu) {
  const Batch b = make_batch(911);
  const int64_t rows = static_cast<int64_t>(b.params.size());
  Rows cpu_x = b.x;
  std::vector<int32_t> want(static_cast<size_t>(rows), -3);
  cpu_.sample_rows({cpu_x.data(), rows, kVocab}, b.args(), want.data());

  Rows gpu_x = b.x;
  std::vector<int32_t> got(want.size(), -2);
  gpu_->sample_rows({gpu_x.data(), rows, kVocab}, b.args(), got.data());
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  sync();
  EXPECT_EQ(got, want);

  // Both kernel variants and every team size through the raw launcher.
  const auto params = managed(b.params);
  const auto pt = managed(b.penalty_tokens), pc = managed(b.penalty_counts);
  const auto bt = managed(b.bias_tokens);
  const auto bv = managed(b.bias_values);
  const auto masks = managed(b.masks);
  cuda::SampleRowsDevice d{params.data(), pt.data(), pc.data(), bt.data(), bv.data(), masks.data()};
  const cuda::SampleLaunch launches[] = {{1, 1}, {1, 2}, {2, 0}, {4, 0}, {8, 0}, {16, 0}};
  for (const cuda::SampleLaunch& how : launches) {
    Rows x = b.x;
    ManagedVector<int32_t> out(static_cast<size_t>(rows), -2);
    ASSERT_EQ(cuda::sample_rows(x.data(), rows, kVocab, d, out.data(), nullptr, how), cudaSuccess);
    sync();
    EXPECT_EQ(std::vector<int32_t>(out.begin(), out.end()), want)
        << "ranks " << how.ranks << ", rows per SM " << how.rows_per_sm;
    // The processed logits too (penalties and bias, applied by the team's ranks); masks are
    // applied on reading only.
    for (int64_t r = 0; r < rows; ++r) {
      if (b.params[static_cast<size_t>(r)].mask >= 0) continue;
      EXPECT_EQ(
          0, std::memcmp(x.data() + r * kVocab, cpu_x.data() + r * kVocab, sizeof(float) * kVocab))
          << "ranks " << how.ranks << ", row " << r;
    }
  }

  // Each row alone (its own launch: the largest team) draws what it drew in the batch.
  const ks::RowsArgs all = b.args();
  for (int64_t r = 0; r < rows; ++r) {
    Rows x(b.x.begin() + r * kVocab, b.x.begin() + (r + 1) * kVocab);
    ks::RowsArgs one = all;
    one.params = b.params.data() + r;
    int32_t token = -2;
    gpu_->sample_rows({x.data(), 1, kVocab}, one, &token);
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    sync();
    EXPECT_EQ(token, want[static_cast<size_t>(r)]) << "row " << r;
  }
}

}  // namespace
}  // namespace di::backend::testing
