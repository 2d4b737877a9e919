// Engine::InFlight: a forward that has been issued and not completed yet (engine.cc's worker
// thread, or engine_pending.cc's deferred steps). Private to the engine's files.
#pragma once

#include <chrono>
#include <future>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"

namespace di::engine {

struct Engine::InFlight {
  StepPlan plan;
  std::future<Status> done;  // the forward on the worker thread (async_scheduling)
  std::chrono::steady_clock::time_point launched;
  // Pending tokens (engine_pending.cc): issued on the owner thread, its tokens on the backend
  // until finish_deferred. Its sequences by id (a plan's pointers may dangle once a sequence is
  // removed): every chunk's, and the sampling chunks' in logits-row order.
  bool deferred = false;
  Status issued;
  model::LogitsSelection selection;
  std::vector<RequestId> chunk_ids, sample_ids;
  std::unordered_map<RequestId, int64_t> sample_row;  // sample_ids' index of each
  std::unordered_set<RequestId> pending_ids;          // chunks reading the previous step's tokens
  bool speculated = false;
  std::vector<int64_t> placeholder_at;  // per sampling row: its placeholder's index in tokens
};

}  // namespace di::engine
