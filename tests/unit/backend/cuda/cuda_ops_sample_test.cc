// Ops::sample_rows on the device against CpuOps: the same token (and the same processed logits)
// for every row, on vocabulary-wide rows with every parameter, penalty lists, logit bias with a
// repeated id, allowed-token masks (one allowing nothing), exact ties and -0.0 vs +0.0.
#include <algorithm>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "kernels/ref/sample_math.h"
#include "sample_rows_input.h"

namespace di::backend::testing {
namespace {

namespace ks = kernels::sample;

using Case = SampleRowsInput;

Case random_case(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(cols) - 1), cnt(0, 3);
  const float temps[] = {0.0f, 0.7f, 1.0f, 1.6f, 0.05f, 1.0f};
  const int ks_[] = {0, 1, 3, 50, 0, 0, 1000};
  const float ps[] = {1.0f, 0.95f, 0.5f, 0.1f, 1.0f};
  const float mins[] = {0.0f, 0.0f, 0.02f, 0.3f};
  Case c;
  const int64_t words = ks::mask_words(cols);
  for (int64_t r = 0; r < rows; ++r) {
    ks::RowParams p;
    p.key = ks::row_key(rng(), static_cast<uint64_t>(r), 77);
    p.temperature = temps[r % 6];
    p.top_k = ks_[r % 7];
    p.top_p = ps[(r / 2) % 5];
    p.min_p = mins[(r / 3) % 4];
    p.repetition_penalty = r % 3 == 0 ? 1.3f : 1.0f;
    p.presence_penalty = r % 4 == 1 ? 0.5f : 0.0f;
    p.frequency_penalty = r % 5 == 2 ? -0.25f : 0.0f;
    p.skip = r % 11 == 10;
    p.penalty_begin = static_cast<int32_t>(c.penalty_tokens.size());
    std::vector<int32_t> distinct;
    for (int i = 0; i < 40; ++i) distinct.push_back(tok(rng));
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int32_t t : distinct) {
      c.penalty_tokens.push_back(t);
      c.penalty_counts.push_back(cnt(rng));
    }
    p.penalty_count = static_cast<int32_t>(distinct.size());
    p.bias_begin = static_cast<int32_t>(c.bias_tokens.size());
    if (r % 3 == 1) {
      for (auto [t, b] : {std::pair{5, 3.0f}, {17, -100.0f}, {5, 0.5f}, {tok(rng), 2.5f}}) {
        c.bias_tokens.push_back(t);
        c.bias_values.push_back(b);
      }
      p.bias_count = 4;
    }
    if (r % 5 == 3 || r == 8) {
      p.mask = static_cast<int32_t>(c.masks.size() / static_cast<size_t>(words));
      const int modulus = r == 8 ? 0 : static_cast<int>(r % 3) + 1;  // row 8: nothing allowed
      for (int64_t w = 0; w < words; ++w) {
        uint32_t bits = 0;
        for (int b = 0; b < 32; ++b) {
          if (modulus > 0 && (w * 32 + b) % modulus == 0) bits |= 1u << b;
        }
        c.masks.push_back(bits);
      }
    }
    c.params.push_back(p);
  }
  return c;
}

void expect_same_draws(
    const CpuOps& cpu, CudaOps& gpu, int64_t rows, int64_t cols, uint32_t seed, float scale) {
  Rows x = random_rows(static_cast<size_t>(rows * cols), seed, scale);
  std::mt19937 rng(seed);
  for (int64_t r = 2; r < rows; r += 4) {  // exact ties, -0.0 and +0.0
    const float values[] = {-1.5f, -0.0f, 0.0f, 0.25f, 3.0f, 3.0f};
    for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(r * cols + j)] = values[rng() % 6];
  }
  Rows y = x;
  const Case c = random_case(rows, cols, seed + 1);
  std::vector<int32_t> want(static_cast<size_t>(rows), -3), got(want.size(), -2);
  cpu.sample_rows({x.data(), rows, cols}, c.args(cols), want.data());
  gpu.sample_rows({y.data(), rows, cols}, c.args(cols), got.data());
  ASSERT_TRUE(gpu.status().ok()) << gpu.status().to_string();
  sync();
  EXPECT_EQ(got, want);
  // The processed logits too (penalties, bias in order); masks are applied on reading only.
  int64_t differ = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (c.params[static_cast<size_t>(r)].mask >= 0) continue;
    for (int64_t j = 0; j < cols; ++j) {
      const size_t i = static_cast<size_t>(r * cols + j);
      differ += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
    }
  }
  EXPECT_EQ(differ, 0);
}

TEST_F(CudaOpsTest, SampleRowsMatchCpuAtTheVocabularyWidth) {
  expect_same_draws(cpu_, *gpu_, 66, 129280, 901, 1.0f);
  expect_same_draws(cpu_, *gpu_, 33, 129280, 902, 6.0f);  // peaked rows
}

TEST_F(CudaOpsTest, SampleRowsMatchCpuOnSmallRows) {
  expect_same_draws(cpu_, *gpu_, 77, 1000, 903, 2.0f);
  expect_same_draws(cpu_, *gpu_, 5, 37, 904, 1.0f);  // a width that is no multiple of 32
}

}  // namespace
}  // namespace di::backend::testing
