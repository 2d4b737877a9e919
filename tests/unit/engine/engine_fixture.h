// The engine tests' fixture: the golden v41-mini checkpoint on the CPU backend, and helpers that
// run requests to completion (together, or each alone in a fresh engine).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "engine/engine.h"

namespace di::engine {

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    threads_ = new ThreadPool(2);
    ops_ = new backend::CpuOps(*threads_);
    auto m = model::Model::load(std::string(DI_SHARED_DIR) + "/golden/v41-mini/checkpoint", *ops_);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete ops_;
    delete threads_;
  }

  std::unique_ptr<Engine> make(EngineOptions o) {
    auto e = Engine::create(*model_, o);
    EXPECT_TRUE(e.has_value()) << e.status().to_string();
    return e.has_value() ? std::move(e).value() : nullptr;
  }

  // Runs until every request finishes; returns the tokens per request id.
  static std::map<RequestId, std::vector<int32_t>> run(Engine& e,
                                                       const std::vector<Request>& reqs) {
    std::map<RequestId, std::vector<int32_t>> out;
    for (const Request& r : reqs) EXPECT_TRUE(e.add_request(r).ok());
    while (e.has_unfinished()) {
      for (const RequestUpdate& u : e.step()) {
        EXPECT_NE(u.finish, FinishReason::kError) << u.error;
        for (const auto& t : u.new_tokens) out[u.id].push_back(t.token);
      }
    }
    return out;
  }

  static std::vector<Request> random_requests(int n, uint32_t seed, bool sampled) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> tok(3, 511), len(1, 40), out(1, 6);
    std::vector<Request> reqs;
    for (int i = 0; i < n; ++i) {
      Request r;
      r.id = i;
      for (int k = len(rng); k > 0; --k) r.prompt.push_back(tok(rng));
      r.max_tokens = out(rng);
      if (sampled) {
        r.sampling.temperature = 0.8f;
        r.sampling.top_p = 0.95f;
        r.sampling.seed = 1000 + static_cast<uint64_t>(i);
      }
      reqs.push_back(r);
    }
    return reqs;
  }

  // Each request in a fresh engine without a prefix cache.
  static std::map<RequestId, std::vector<int32_t>> run_each_alone(const std::vector<Request>& reqs,
                                                                  int64_t replay_tail = -1) {
    std::map<RequestId, std::vector<int32_t>> out;
    for (const Request& r : reqs) {
      EngineOptions o{1, 512, 4 << 20, 16};
      o.replay_tail = replay_tail;
      o.prefix_cache_snapshots = 0;
      auto e = Engine::create(*model_, o);
      EXPECT_TRUE(e.has_value());
      out[r.id] = run(**e, {r})[r.id];
    }
    return out;
  }

  static inline ThreadPool* threads_ = nullptr;
  static inline backend::CpuOps* ops_ = nullptr;
  static inline model::Model* model_ = nullptr;
};

}  // namespace di::engine
