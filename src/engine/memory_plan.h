// Sizing the V4.1 state pool once at start-up from a byte budget (issue #4 item 3, like vLLM's
// gpu-memory-utilization turned into a CPU byte budget). A sequence costs its window rings (all
// layers, window_size rows) plus, per compressed-KV stream, up to one partly filled page; a token
// costs its compressed-KV and index-key rows (1/ratio per stream). The plan is checked against
// StatePool::bytes() after creation, so it can never exceed the budget silently.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/state_pool.h"
#include "util/status.h"

namespace di::engine {

struct MemoryPlan {
  model::StatePoolOptions pool;  // max_sequences, max_tokens (the capacity), entries_per_page
  int64_t bytes_per_sequence = 0;
  double bytes_per_token = 0;
  int num_snapshots = 0;  // prefix-cache window snapshots, one sequence's windows each
  int64_t snapshot_bytes = 0;
};

// kInvalidArgument naming the flag when `budget_bytes` cannot hold `max_num_seqs` sequences,
// `num_snapshots` prefix-cache snapshots and at least one page of tokens per sequence.
Expected<MemoryPlan> plan_state_pool(const model::ModelConfig& config,
                                     int64_t budget_bytes,
                                     int max_num_seqs,
                                     int entries_per_page,
                                     int num_snapshots = 0);

// "state pool: 12.0 MiB for 8 sequences and 4096 tokens (...)": the start-up capacity line.
std::string describe_capacity(const MemoryPlan& plan, int64_t actual_bytes);

}  // namespace di::engine
