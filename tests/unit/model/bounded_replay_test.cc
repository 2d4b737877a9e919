// SWA bounded replay: prefill runs the layers after the last KV source on each prompt's tail only.
// Chunked replay equals one-shot replay bitwise; logits stay close to the exact prefill; rows that
// replay skipped cannot be asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "model/model.h"

namespace di::model {
namespace {

class BoundedReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::load(std::string(DI_SHARED_DIR) + "/golden/v41-mini/checkpoint", ops_);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    model_ = std::move(m).value();
    pool_ = std::make_unique<StatePool>(
        StatePool::create(model_->config(), {4, 2048, 16}, model_->ops()).value());
    std::mt19937 rng(5);
    std::uniform_int_distribution<int32_t> d(3, model_->config().vocab_size - 1);
    for (int i = 0; i < 90; ++i) prompt_.push_back(d(rng));
  }

  // Feeds the prompt in `chunks` (sizes) with replay from `replay_from`, then `decode` tokens;
  // returns the last prompt row's logits followed by every decode row's.
  std::vector<float> run(const std::vector<int>& chunks, int64_t replay_from, int decode) {
    auto seq = pool_->create_sequence().value();
    std::vector<float> out, logits;
    size_t pos = 0;
    for (int n : chunks) {
      ForwardContext ctx;
      ctx.pool = pool_.get();
      SequenceChunk ch{&seq,
                       {prompt_.begin() + static_cast<int64_t>(pos),
                        prompt_.begin() + static_cast<int64_t>(pos) + n},
                       replay_from};
      ctx.chunks.push_back(ch);
      pos += static_cast<size_t>(n);
      const bool last = pos == prompt_.size();
      Status s =
          model_->forward(ctx, last ? std::vector<int64_t>{n - 1} : std::vector<int64_t>{}, logits);
      EXPECT_TRUE(s.ok()) << s.to_string();
      if (last) out = logits;
    }
    int32_t next = 7;
    for (int i = 0; i < decode; ++i) {
      ForwardContext ctx;
      ctx.pool = pool_.get();
      ctx.chunks.push_back({&seq, {next}});
      EXPECT_TRUE(model_->forward(ctx, {0}, logits).ok());
      out.insert(out.end(), logits.begin(), logits.end());
      next = static_cast<int32_t>(100 + i);
    }
    pool_->release_sequence(seq);
    return out;
  }

  ThreadPool threads_{2};
  backend::CpuOps ops_{threads_};
  std::unique_ptr<Model> model_;
  std::unique_ptr<StatePool> pool_;
  std::vector<int32_t> prompt_;
};

TEST_F(BoundedReplay, LateLayersStartAfterTheLastKvSourceAndEngram) {
  EXPECT_EQ(model_->config().late_layer_start(), 5);
}

TEST_F(BoundedReplay, ChunkedReplayEqualsOneShotReplay) {
  const int64_t tail_start = 90 - 13;  // window 8 + DSpark block 5
  auto one_shot = run({90}, tail_start, 4);
  for (const std::vector<int>& chunks :
       std::vector<std::vector<int>>{{40, 50}, {77, 13}, {80, 10}, {30, 47, 1, 12}}) {
    auto chunked = run(chunks, tail_start, 4);
    ASSERT_EQ(chunked.size(), one_shot.size());
    EXPECT_EQ(std::memcmp(chunked.data(), one_shot.data(), one_shot.size() * 4), 0)
        << chunks.size();
  }
}

TEST_F(BoundedReplay, StaysCloseToExactPrefill) {
  auto exact = run({90}, 0, 6);
  auto replayed = run({90}, 90 - 13, 6);
  ASSERT_EQ(exact.size(), replayed.size());
  const int64_t V = model_->config().vocab_size;
  double max_abs = 0, sum = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(exact[i] - replayed[i])));
    sum += std::fabs(exact[i] - replayed[i]);
  }
  const double mean = sum / static_cast<double>(exact.size());
  std::printf("bounded replay vs exact (7 rows x %lld): max abs %.4f, mean abs %.5f\n",
              static_cast<long long>(V), max_abs, mean);
  EXPECT_GT(max_abs, 0.0);  // the approximation is real: skipped window slots are not seen
  EXPECT_LT(mean, 0.5);     // and small: the golden end-to-end tolerance for a whole model
}

TEST_F(BoundedReplay, SkippedRowsCannotBeAskedFor) {
  auto seq = pool_->create_sequence().value();
  ForwardContext ctx;
  ctx.pool = pool_.get();
  ctx.chunks.push_back({&seq, prompt_, 80});
  std::vector<float> logits;
  Status s = model_->forward(ctx, {10}, logits);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  pool_->release_sequence(seq);
}

}  // namespace
}  // namespace di::model
