// Property tests of the forward on the golden checkpoints: incremental decoding equals the full
// forward, chunked prefill equals one-shot prefill (any chunking, including splits inside a
// ratio-2 group and inside an Engram n-gram), and a sequence's logits do not depend on the batch.
// All three are bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "model/model.h"

namespace di::model {
namespace {

std::string golden_checkpoint(const char* set) {
  return std::string(DI_SHARED_DIR) + "/golden/" + set + "/checkpoint";
}

class ForwardProperty : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto m = Model::load(golden_checkpoint(GetParam()), ops_);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    model_ = std::move(m).value();
    auto p = StatePool::create(model_->config(), {8, 4096, 16}, model_->ops());
    ASSERT_TRUE(p.has_value());
    pool_ = std::make_unique<StatePool>(std::move(p).value());
  }

  std::vector<int32_t> random_tokens(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> d(3, model_->config().vocab_size - 1);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = d(rng);
    return t;
  }

  // Runs one forward over several (sequence, tokens) chunks; returns all rows' logits per chunk.
  std::vector<std::vector<float>> run(
      std::vector<std::pair<SequenceState*, std::vector<int32_t>>> chunks) {
    ForwardContext ctx;
    ctx.pool = pool_.get();
    std::vector<int64_t> rows;
    int64_t row = 0;
    for (auto& [seq, toks] : chunks) {
      ctx.chunks.push_back({seq, toks});
      for (size_t i = 0; i < toks.size(); ++i) rows.push_back(row++);
    }
    std::vector<float> logits;
    Status s = model_->forward(ctx, rows, logits);
    EXPECT_TRUE(s.ok()) << s.to_string();
    std::vector<std::vector<float>> out;
    const int64_t V = model_->config().vocab_size;
    int64_t r = 0;
    for (auto& [seq, toks] : chunks) {
      out.emplace_back(logits.begin() + r * V,
                       logits.begin() + (r + static_cast<int64_t>(toks.size())) * V);
      r += static_cast<int64_t>(toks.size());
    }
    return out;
  }

  // Logits of every position when `tokens` is fed in the given chunk sizes.
  std::vector<float> chunked(const std::vector<int32_t>& tokens, const std::vector<int>& sizes) {
    auto seq = pool_->create_sequence().value();
    std::vector<float> all;
    size_t pos = 0;
    for (int n : sizes) {
      std::vector<int32_t> part(tokens.begin() + static_cast<int64_t>(pos),
                                tokens.begin() + static_cast<int64_t>(pos) + n);
      auto out = run({{&seq, part}});
      all.insert(all.end(), out[0].begin(), out[0].end());
      pos += static_cast<size_t>(n);
    }
    pool_->release_sequence(seq);
    return all;
  }

  ThreadPool threads_{2};
  backend::CpuOps ops_{threads_};
  std::unique_ptr<Model> model_;
  std::unique_ptr<StatePool> pool_;
};

void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, int64_t V) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      FAIL() << "first difference at row " << i / V << ", column " << i % V << ": " << a[i]
             << " vs " << b[i];
    }
  }
}

TEST_P(ForwardProperty, IncrementalDecodeEqualsFullForward) {
  const auto tokens = random_tokens(75, 11);
  const int64_t V = model_->config().vocab_size;
  auto full = chunked(tokens, {75});
  std::vector<int> steps = {60};
  for (int i = 0; i < 15; ++i) steps.push_back(1);
  expect_bitwise_equal(chunked(tokens, steps), full, V);
}

TEST_P(ForwardProperty, ChunkedPrefillEqualsOneShot) {
  const auto tokens = random_tokens(71, 12);
  const int64_t V = model_->config().vocab_size;
  auto full = chunked(tokens, {71});
  // Odd sizes split ratio-2 groups and Engram n-grams; 20 > window exercises ring wrap-around.
  for (const std::vector<int>& sizes : std::vector<std::vector<int>>{
           {1, 70}, {3, 5, 7, 9, 11, 13, 23}, {20, 20, 20, 11}, {2, 1, 1, 33, 34}, {35, 36}}) {
    expect_bitwise_equal(chunked(tokens, sizes), full, V);
  }
}

TEST_P(ForwardProperty, LogitsDoNotDependOnTheBatch) {
  const auto a = random_tokens(45, 21), b = random_tokens(17, 22), c = random_tokens(66, 23);
  const int64_t V = model_->config().vocab_size;
  auto alone = chunked(a, {40, 1, 1, 1, 1, 1});
  auto sa = pool_->create_sequence().value();
  auto sb = pool_->create_sequence().value();
  auto sc = pool_->create_sequence().value();
  std::vector<float> batched;
  // a's prefill shares a step with b's prefill; a's decode steps share with c's chunks and b's
  // decode.
  auto o1 = run({{&sb, b}, {&sa, {a.begin(), a.begin() + 40}}});
  batched.insert(batched.end(), o1[1].begin(), o1[1].end());
  for (int i = 40; i < 45; ++i) {
    std::vector<std::pair<SequenceState*, std::vector<int32_t>>> chunks;
    if (i < 43) chunks.push_back({&sc, {c.begin() + (i - 40) * 22, c.begin() + (i - 39) * 22}});
    chunks.push_back({&sa, {a[static_cast<size_t>(i)]}});
    chunks.push_back({&sb, {b[static_cast<size_t>(i - 40)]}});
    auto o = run(chunks);
    const auto& mine = o[chunks.size() - 2];
    batched.insert(batched.end(), mine.begin(), mine.end());
  }
  expect_bitwise_equal(batched, alone, V);
  pool_->release_sequence(sa);
  pool_->release_sequence(sb);
  pool_->release_sequence(sc);
}

// Pending tokens: a greedy decode whose steps embed the previous step's argmax from backend memory
// (issued before that token is downloaded, then committed) gives the logits and tokens of the
// host-fed decode, bitwise, also when the pending row shares its step with another sequence's
// prefill chunk (the pending row is then not the step's first).
TEST_P(ForwardProperty, PendingTokensEqualHostTokens) {
  const auto prompt = random_tokens(40, 41), other = random_tokens(9, 42);
  const int64_t V = model_->config().vocab_size;
  constexpr int kSteps = 8;
  auto first_argmax = [&](const std::vector<float>& row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.begin() + V) - row.begin());
  };
  // Host-fed: each step's token is the previous step's argmax, read on the host.
  std::vector<std::vector<float>> want;
  std::vector<int32_t> want_tokens;
  {
    auto s = pool_->create_sequence().value();
    auto o = pool_->create_sequence().value();
    auto out = run({{&s, prompt}});
    int32_t next = first_argmax(std::vector<float>(out[0].end() - V, out[0].end()));
    for (int k = 0; k < kSteps; ++k) {
      want_tokens.push_back(next);
      std::vector<std::pair<SequenceState*, std::vector<int32_t>>> chunks;
      if (k == 3) chunks.push_back({&o, other});
      chunks.push_back({&s, {next}});
      auto step = run(chunks);
      want.push_back(step.back());
      next = first_argmax(step.back());
    }
    pool_->release_sequence(s);
    pool_->release_sequence(o);
  }
  // Pending: the argmax stays in backend memory and feeds the next step's chunk.
  auto s = pool_->create_sequence().value();
  auto o = pool_->create_sequence().value();
  auto out = run({{&s, prompt}});
  const int32_t first = first_argmax(std::vector<float>(out[0].end() - V, out[0].end()));
  LogitsSelection selections[2];
  LogitsSelection* feed = nullptr;
  for (int k = 0; k < kSteps; ++k) {
    ForwardContext ctx;
    ctx.pool = pool_.get();
    if (k == 3) ctx.chunks.push_back({&o, other});
    ctx.chunks.push_back({&s, {feed ? 0 : first}});
    if (feed)
      ctx.chunks.back().pending = reinterpret_cast<const int32_t*>(feed->device_tokens.data());
    const int64_t row = ctx.chunks.size() == 2 ? static_cast<int64_t>(other.size()) : 0;
    LogitsSelection& sel = selections[k % 2];
    sel = LogitsSelection();
    sel.defer = true;
    sel.full = {kLogitsArgmax, kLogitsFull};  // the same row twice: its token and its logits
    std::vector<float> logits;
    ASSERT_TRUE(model_->forward(ctx, {row, row}, logits, &sel).ok());
    expect_bitwise_equal(logits, want[static_cast<size_t>(k)], V);
    if (feed) {
      ASSERT_TRUE(model_->wait_tokens(*feed).ok());
      EXPECT_EQ(feed->argmax[0], want_tokens[static_cast<size_t>(k)]) << "step " << k;
      ASSERT_TRUE(model_->commit_token(s, feed->argmax[0]).ok());
    }
    feed = &sel;
  }
  ASSERT_TRUE(model_->wait_tokens(*feed).ok());
  // A pending chunk holds its token alone; a step on an uncommitted token is refused untouched.
  const int64_t before = s.num_tokens;
  std::vector<float> logits;
  ForwardContext two;
  two.pool = pool_.get();
  two.chunks.push_back({&s, {0, 0}});
  two.chunks.back().pending = reinterpret_cast<const int32_t*>(feed->device_tokens.data());
  EXPECT_EQ(model_->forward(two, {}, logits).code(), StatusCode::kInvalidArgument);
  ForwardContext one;
  one.pool = pool_.get();
  one.chunks.push_back({&s, {0}});
  one.chunks.back().pending = reinterpret_cast<const int32_t*>(feed->device_tokens.data());
  LogitsSelection sel;
  sel.defer = true;
  sel.full = {kLogitsArgmax};
  ASSERT_TRUE(model_->forward(one, {0}, logits, &sel).ok());
  ASSERT_TRUE(model_->wait_tokens(sel).ok());
  ForwardContext again;
  again.pool = pool_.get();
  again.chunks.push_back({&s, {5}});
  const Status refused = model_->forward(again, {}, logits);
  if (model_->engram_layout()) {
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
    EXPECT_EQ(s.num_tokens, before + 1);
  }
  EXPECT_TRUE(model_->commit_token(s, sel.argmax[0]).ok());
  EXPECT_FALSE(model_->commit_token(s, V).ok());
  pool_->release_sequence(s);
  pool_->release_sequence(o);
}

// Bad input is refused before the forward touches a sequence: a sequence twice in one step, a
// chunk without a live sequence, a token outside the vocabulary. The sequences then continue as
// if the call had not happened.
TEST_P(ForwardProperty, BadInputLeavesTheSequencesAlone) {
  const auto a = random_tokens(12, 31), b = random_tokens(5, 32);
  auto sa = pool_->create_sequence().value();
  auto sb = pool_->create_sequence().value();
  std::vector<float> logits;
  auto refused = [&](std::vector<SequenceChunk> chunks, const char* what) {
    ForwardContext ctx;
    ctx.pool = pool_.get();
    ctx.chunks = std::move(chunks);
    const Status s = model_->forward(ctx, {}, logits);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.to_string();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.to_string();
  };
  refused({{&sb, b}, {&sa, a}, {&sb, b}}, "a sequence appears twice");
  refused({{&sa, a}, {nullptr, b}}, "chunk without a live sequence");
  refused({{&sa, a}, {&sb, {3, model_->config().vocab_size}}}, "outside [0, ");
  EXPECT_EQ(sa.num_tokens, 0);
  EXPECT_EQ(sb.num_tokens, 0);
  // The same prompts as on fresh sequences.
  const auto ok = run({{&sa, a}, {&sb, b}});
  const auto fresh_a = chunked(a, {12});
  expect_bitwise_equal(ok[0], fresh_a, model_->config().vocab_size);
  pool_->release_sequence(sa);
  pool_->release_sequence(sb);
}

INSTANTIATE_TEST_SUITE_P(Golden,
                         ForwardProperty,
                         ::testing::Values("v41-mini", "v41-mini-topk"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace di::model
