// Engram's n-gram hash ids (spec §1.6; reference NgramHashState): each position's compressed token
// and its look-back tokens are multiplied by per-layer odd multipliers and XOR-folded; each n-gram
// size and head takes the fold modulo its own prime, offset into the layer's table. The look-back
// carries across calls through SequenceState::engram_history, so chunking never changes a hash.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace di::model {

struct EngramTables {
  // [engram layer][(ngram - 2) * n_heads + head]
  std::vector<std::vector<int64_t>> primes;
  std::vector<std::vector<int64_t>> offsets;
  std::vector<int64_t> rows;  // table rows per engram layer (sum of its primes)
  // [engram layer][look-back 0 .. max_ngram - 1]
  std::vector<std::vector<int64_t>> multipliers;
};

// Derives primes, offsets and multipliers from the config exactly as the reference does.
Expected<EngramTables> derive_engram_tables(const ModelConfig& config);

class EngramHasher {
 public:
  EngramHasher(const ModelConfig& config, EngramTables tables, std::vector<int32_t> token_map);

  int num_columns() const { return (max_ngram_ - 1) * n_heads_; }
  const EngramTables& tables() const { return tables_; }

  // out: [tokens.size(), n_engram_layers, num_columns()]. `history` holds the compressed ids of the
  // previous max_ngram - 1 tokens (oldest first; -1 before the sequence start) and is updated.
  void hash(std::span<const int32_t> tokens, std::vector<int64_t>& history,
            std::span<int64_t> out) const;

 private:
  int max_ngram_ = 0;
  int n_heads_ = 0;
  int64_t pad_id_ = 0;
  EngramTables tables_;
  std::vector<int32_t> token_map_;
};

}  // namespace di::model
