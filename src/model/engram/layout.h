// Where each hash bucket of an Engram layer lives in that layer's embedding table
// (the reference's `EngramLayout.from_args`): per layer, one prime-sized range of rows
// per (n-gram size, head), laid out back to back.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace di::engram {

struct EngramLayoutConfig {
  std::vector<int64_t> layer_ids;  // model layers that carry an Engram module
  int32_t max_ngram_size = 0;      // n-grams of sizes 2..max_ngram_size are hashed
  int32_t n_heads = 0;             // hash heads per n-gram size
  int64_t vocab_size = 0;          // engram_vocab_size: every bucket prime exceeds it - 1
};

struct EngramLayout {
  std::vector<int64_t> layer_ids;
  int32_t max_ngram_size = 0;
  int32_t n_heads = 0;
  // primes[layer][(n - 2) * n_heads + h]: bucket count of head h for n-grams of size n.
  std::vector<std::vector<int64_t>> primes;
  // offsets[layer][k]: first table row of bucket range k (exclusive prefix sum of primes).
  std::vector<std::vector<int64_t>> offsets;
  // table_rows[layer]: rows of that layer's embedding table (sum of its primes).
  std::vector<int64_t> table_rows;

  int32_t buckets_per_layer() const { return (max_ngram_size - 1) * n_heads; }

  // Primes are drawn in (layer, n-gram size, head) order, each the smallest prime above
  // vocab_size - 1 that no earlier bucket took: the search restarts at the vocabulary for
  // every n-gram size but never reuses a prime, across all layers.
  static Expected<EngramLayout> from_config(const EngramLayoutConfig& config);
};

}  // namespace di::engram
