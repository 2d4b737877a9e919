#include "model/engram_hasher.h"

#include <algorithm>


namespace di::model {

EngramHasher::EngramHasher(const ModelConfig& config, EngramTables tables,
                           std::vector<int32_t> token_map)
    : max_ngram_(config.engram_max_ngram_size),
      n_heads_(config.engram_n_heads),
      tables_(std::move(tables)),
      token_map_(std::move(token_map)) {
  pad_id_ = token_map_[static_cast<size_t>(config.engram_pad_id)];
}

void EngramHasher::hash(std::span<const int32_t> tokens, std::vector<int64_t>& history,
                        std::span<int64_t> out) const {
  const int look = max_ngram_ - 1;
  const size_t n_layers = tables_.primes.size();
  const int cols = num_columns();
  // window[i] = compressed id at offset i of (history ++ chunk); -1 = before the sequence start
  std::vector<int64_t> window(history.begin(), history.end());
  for (int32_t t : tokens) window.push_back(token_map_[static_cast<size_t>(t)]);
  std::vector<int64_t> shifted(static_cast<size_t>(max_ngram_));
  for (size_t r = 0; r < tokens.size(); ++r) {
    const size_t cur = r + static_cast<size_t>(look);
    bool blocked = false;
    for (int s = 0; s < max_ngram_; ++s) {
      const int64_t src = window[cur - static_cast<size_t>(s)];
      blocked = blocked || src < 0;  // before the start (or a dead token) blocks all further look-back
      shifted[static_cast<size_t>(s)] = blocked ? pad_id_ : src;
    }
    for (size_t l = 0; l < n_layers; ++l) {
      const auto& mult = tables_.multipliers[l];
      int64_t rolling = shifted[0] * mult[0];
      for (int i = 1; i < max_ngram_; ++i) {
        rolling ^= shifted[static_cast<size_t>(i)] * mult[static_cast<size_t>(i)];
        for (int h = 0; h < n_heads_; ++h) {
          const size_t c = static_cast<size_t>((i - 1) * n_heads_ + h);
          out[(r * n_layers + l) * static_cast<size_t>(cols) + c] =
              rolling % tables_.primes[l][c] + tables_.offsets[l][c];
        }
      }
    }
  }
  // keep the last `look` ids
  std::copy(window.end() - look, window.end(), history.begin());
}

}  // namespace di::model
