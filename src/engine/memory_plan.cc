#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>

namespace di::engine {

Expected<MemoryPlan> plan_state_pool(const model::ModelConfig& config,
                                     int64_t budget_bytes,
                                     int max_num_seqs,
                                     int entries_per_page,
                                     int num_snapshots) {
  if (max_num_seqs <= 0) return invalid_argument("--max-num-seqs must be > 0");
  if (entries_per_page <= 0) return invalid_argument("entries_per_page must be > 0");
  if (num_snapshots < 0) return invalid_argument("--prefix-cache-snapshots must be >= 0");
  MemoryPlan plan;
  // The pool's own row sizes (FP8 window rows, FP4 compressed KV, fp32 index keys).
  const int64_t window = model::StatePool::window_bytes_per_sequence(config);
  const int64_t entry = model::StatePool::entry_bytes(config);
  int64_t slack_per_seq = 0;  // one partly filled page per stream and sequence
  double per_token = 0;
  int64_t rounding = 0;  // the pool rounds each stream's entries up to whole pages
  int max_ratio = 1;
  for (int layer : config.kv_source_layers) {
    const int ratio = config.compress_ratios[static_cast<size_t>(layer)];
    max_ratio = std::max(max_ratio, ratio);
    slack_per_seq += entries_per_page * entry;
    per_token += static_cast<double>(entry) / ratio;
    rounding += entries_per_page * entry;
  }
  plan.bytes_per_sequence =
      window + model::StatePool::carry_bytes_per_sequence(config) + slack_per_seq;
  plan.bytes_per_token = per_token;
  plan.num_snapshots = num_snapshots;
  plan.snapshot_bytes = static_cast<int64_t>(num_snapshots) * window;
  const int64_t fixed =
      static_cast<int64_t>(max_num_seqs) * plan.bytes_per_sequence + rounding + plan.snapshot_bytes;
  const int64_t min_tokens = static_cast<int64_t>(max_num_seqs) * entries_per_page * max_ratio;
  int64_t tokens = 0;
  if (budget_bytes > fixed) {
    tokens = per_token > 0
                 ? static_cast<int64_t>(static_cast<double>(budget_bytes - fixed) / per_token)
                 : static_cast<int64_t>(config.max_seq_len) * max_num_seqs;
  }
  if (tokens < min_tokens) {
    const int64_t need = fixed + static_cast<int64_t>(static_cast<double>(min_tokens) * per_token);
    return invalid_argument("--kv-cache-bytes " + std::to_string(budget_bytes) +
                            " is too small for " + std::to_string(max_num_seqs) +
                            " sequences and " + std::to_string(num_snapshots) +
                            " prefix-cache snapshots: need at least " + std::to_string(need) +
                            " bytes (or lower --max-num-seqs / --prefix-cache-snapshots)");
  }
  plan.pool.max_sequences = max_num_seqs;
  plan.pool.max_tokens = tokens;
  plan.pool.entries_per_page = entries_per_page;
  return plan;
}

std::string describe_capacity(const MemoryPlan& plan, int64_t actual_bytes) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "state pool: %.1f MiB for %d sequences and %lld tokens (%.1f KiB per sequence, "
                "%.0f bytes per token); prefix cache: %d window snapshots (%.1f MiB)",
                static_cast<double>(actual_bytes + plan.snapshot_bytes) / (1 << 20),
                plan.pool.max_sequences, static_cast<long long>(plan.pool.max_tokens),
                static_cast<double>(plan.bytes_per_sequence) / 1024, plan.bytes_per_token,
                plan.num_snapshots, static_cast<double>(plan.snapshot_bytes) / (1 << 20));
  return buf;
}

}  // namespace di::engine
