// The engine on the CUDA backend (golden checkpoints): steps issued on pending tokens (each
// decode step issued before the previous step's tokens reach the host) give the tokens of an
// engine that waits for every step, and of the CPU backend's engine, greedy and sampled.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "engine/engine.h"
#include "model/model.h"

namespace di::engine {
namespace {

std::string golden_checkpoint(const char* set) {
  const char* env = std::getenv("DI_GOLDEN_DIR");
  const std::string root = env ? env : std::string(DI_SHARED_DIR) + "/golden";
  return root + "/" + set + "/checkpoint";
}

std::vector<Request> requests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(3, 511), len(1, 30), out(2, 12);
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    for (int k = len(rng); k > 0; --k) r.prompt.push_back(tok(rng));
    r.max_tokens = out(rng);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 300 + static_cast<uint64_t>(i);
    }
    reqs.push_back(r);
  }
  return reqs;
}

std::map<RequestId, std::vector<int32_t>> run(model::Model& m,
                                              bool pending,
                                              int max_seqs,
                                              const std::vector<Request>& reqs,
                                              int64_t* pending_steps) {
  EngineOptions o{max_seqs, 64, 32 << 20, 16};
  o.pending_tokens = pending;
  auto e = Engine::create(m, o);
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  std::map<RequestId, std::vector<int32_t>> out;
  if (!e) return out;
  for (const Request& r : reqs) EXPECT_TRUE((*e)->add_request(r).ok());
  while ((*e)->has_unfinished()) {
    for (const RequestUpdate& u : (*e)->step()) {
      EXPECT_NE(u.finish, FinishReason::kError) << u.error;
      for (const auto& t : u.new_tokens) out[u.id].push_back(t.token);
    }
  }
  *pending_steps = (*e)->stats().num_pending_steps;
  return out;
}

TEST(CudaEngine, PendingTokensGiveTheTokensOfWaitingAndOfTheCpu) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  ThreadPool threads(2);
  backend::CpuOps cpu(threads);
  auto gpu = backend::CudaOps::create(threads, backend::CudaOptions{0, size_t{1} << 30});
  ASSERT_TRUE(gpu.has_value()) << gpu.status().to_string();
  for (const char* set : {"v41-mini", "v41-mini-topk"}) {
    SCOPED_TRACE(set);
    const std::string dir = golden_checkpoint(set);
    ASSERT_TRUE(std::filesystem::exists(dir)) << dir << " (set DI_GOLDEN_DIR)";
    auto gm = model::Model::load(dir, **gpu);
    auto cm = model::Model::load(dir, cpu);
    ASSERT_TRUE(gm.has_value() && cm.has_value());
    const auto reqs = requests(10, 17);
    for (int max_seqs : {1, 6}) {
      int64_t on_steps = 0, off_steps = 0, cpu_steps = 0;
      const auto on = run(**gm, true, max_seqs, reqs, &on_steps);
      const auto off = run(**gm, false, max_seqs, reqs, &off_steps);
      const auto host = run(**cm, true, max_seqs, reqs, &cpu_steps);
      ASSERT_TRUE((*gpu)->status().ok()) << (*gpu)->status().to_string();
      EXPECT_EQ(on, off) << "max_num_seqs " << max_seqs;
      EXPECT_EQ(on, host) << "max_num_seqs " << max_seqs;
      EXPECT_GT(on_steps, 0);
      EXPECT_EQ(off_steps, 0);
    }
  }
}

}  // namespace
}  // namespace di::engine
