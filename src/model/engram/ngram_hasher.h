// Per-position Engram n-gram hashing (the reference's `NgramHashState.forward`), as a
// streaming operation: a sequence may arrive in chunks of any sizes (chunked prefill,
// then one token per decode step) and yields exactly the rows a one-shot pass would.
//
// For position p and look-back s (0..max_ngram-1) the source is the compressed token at
// p - s. Once a look-back runs past the sequence start or hits a dead token (compressed
// id < 0, e.g. image tokens), it and every longer look-back use the pad token instead.
// With x_s = token_s * multiplier[layer][s] (int64, wrapping) and
// rolling_n = x_0 ^ x_1 ^ ... ^ x_{n-1}, head h of n-gram size n reads row
//   floor_mod(rolling_n, prime[layer][n][h]) + offset[layer][n][h].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/engram/layout.h"
#include "util/status.h"

namespace di::engram {

// A history entry whose token the host does not know yet: the model hashed its position on the
// backend from a token chosen there (Model's pending tokens), and resolve_pending fills it in
// once the token is downloaded. Never a compressed id (those are > INT32_MIN).
inline constexpr int32_t kPendingToken = INT32_MIN;

// What one sequence carries from one chunk to the next: the last (up to)
// max_ngram_size - 1 compressed tokens, oldest first, dead ones kept as their negative id
// so that they still block later look-backs. Start every new sequence with a fresh one.
struct NgramHistory {
  std::vector<int32_t> recent;  // oldest first, at most max_ngram_size - 1 entries
  int64_t position = 0;         // tokens of this sequence hashed so far
};

class NgramHasher {
 public:
  // multipliers[layer][look_back] must be [layout.layer_ids.size()][max_ngram_size];
  // pad_compressed_id is token_map[engram_pad_id] and must be >= 0.
  static Expected<NgramHasher> create(const EngramLayout& layout,
                                      std::vector<std::vector<int64_t>> multipliers,
                                      int32_t pad_compressed_id);

  int32_t n_layers() const { return static_cast<int32_t>(primes_.size()); }
  int32_t buckets_per_layer() const { return (max_ngram_size_ - 1) * n_heads_; }
  // Row ids written per token: [n_layers][(max_ngram_size - 1) * n_heads], ordered
  // (2-gram head 0, 2-gram head 1, ..., 3-gram head 0, ...).
  std::size_t values_per_position() const {
    return static_cast<std::size_t>(n_layers()) * static_cast<std::size_t>(buckets_per_layer());
  }

  // Hashes the next chunk of a sequence: `compressed` are token_map ids (negative = dead),
  // `out` receives compressed.size() * values_per_position() row ids, position-major.
  // Advances `history`. On error (wrong `out` size) nothing is written or advanced.
  Status hash(std::span<const int32_t> compressed,
              NgramHistory& history,
              std::span<int64_t> out) const;

  // For one position whose own token is pending: writes the compressed tokens at look-backs 1 ..
  // max_ngram_size - 1 as hash() would shift them when the own token is alive (the pad from the
  // first one past the sequence start or dead), and advances `history` by a kPendingToken.
  // Fails, changing nothing, when the history still holds a pending token.
  Status look_back_pending(NgramHistory& history, std::span<int32_t> look_back) const;
  // Replaces the history's pending token by its compressed id; fails when there is none.
  static Status resolve_pending(NgramHistory& history, int32_t compressed);
  static bool holds_pending(const NgramHistory& history);

  int32_t max_ngram_size() const { return max_ngram_size_; }
  int32_t n_heads() const { return n_heads_; }
  int32_t pad() const { return pad_; }
  const std::vector<int64_t>& multipliers(int layer) const { return multipliers_[layer]; }
  const std::vector<int64_t>& primes(int layer) const { return primes_[layer]; }
  const std::vector<int64_t>& offsets(int layer) const { return offsets_[layer]; }

 private:
  NgramHasher() = default;

  int32_t max_ngram_size_ = 0;
  int32_t n_heads_ = 0;
  int32_t pad_ = 0;
  std::vector<std::vector<int64_t>> multipliers_;  // [layer][look_back]
  std::vector<std::vector<int64_t>> primes_;       // [layer][bucket]
  std::vector<std::vector<int64_t>> offsets_;      // [layer][bucket]
};

// out[i] = lookup[token_ids[i]]; fails on an id outside the lookup or a size mismatch.
Status compress_tokens(std::span<const int32_t> lookup,
                       std::span<const int32_t> token_ids,
                       std::span<int32_t> out);

}  // namespace di::engram
