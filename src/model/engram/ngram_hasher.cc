// See ngram_hasher.h.
#include "model/engram/ngram_hasher.h"

#include <algorithm>
#include <string>

#include "kernels/ref/engram_hash.h"

namespace di::engram {
namespace {

Status unresolved() {
  return invalid_argument(
      "ngram hasher: the history holds a pending token (resolve it before the next chunk)");
}

}  // namespace

Expected<NgramHasher> NgramHasher::create(const EngramLayout& layout,
                                          std::vector<std::vector<int64_t>> multipliers,
                                          int32_t pad_compressed_id) {
  if (layout.max_ngram_size < 2 || layout.n_heads < 1) {
    return invalid_argument("ngram hasher: layout needs max_ngram_size >= 2 and n_heads >= 1");
  }
  const std::size_t n_layers = layout.layer_ids.size();
  const std::size_t buckets = static_cast<std::size_t>(layout.buckets_per_layer());
  if (layout.primes.size() != n_layers || layout.offsets.size() != n_layers) {
    return invalid_argument("ngram hasher: layout has inconsistent layer counts");
  }
  for (std::size_t l = 0; l < n_layers; ++l) {
    if (layout.primes[l].size() != buckets || layout.offsets[l].size() != buckets) {
      return invalid_argument("ngram hasher: layout layer " + std::to_string(l) +
                              " has the wrong number of buckets");
    }
    for (int64_t p : layout.primes[l]) {
      if (p < 1) return invalid_argument("ngram hasher: bucket sizes must be positive");
    }
  }
  if (multipliers.size() != n_layers) {
    return invalid_argument("ngram hasher: expected multipliers for " + std::to_string(n_layers) +
                            " layers, got " + std::to_string(multipliers.size()));
  }
  for (const auto& m : multipliers) {
    if (m.size() != static_cast<std::size_t>(layout.max_ngram_size)) {
      return invalid_argument("ngram hasher: expected " + std::to_string(layout.max_ngram_size) +
                              " multipliers per layer, got " + std::to_string(m.size()));
    }
  }
  if (pad_compressed_id < 0) {
    return invalid_argument("ngram hasher: the pad token must not be dead (compressed id " +
                            std::to_string(pad_compressed_id) + ")");
  }
  NgramHasher hasher;
  hasher.max_ngram_size_ = layout.max_ngram_size;
  hasher.n_heads_ = layout.n_heads;
  hasher.pad_ = pad_compressed_id;
  hasher.multipliers_ = std::move(multipliers);
  hasher.primes_ = layout.primes;
  hasher.offsets_ = layout.offsets;
  return hasher;
}

Status NgramHasher::hash(std::span<const int32_t> compressed,
                         NgramHistory& history,
                         std::span<int64_t> out) const {
  const std::size_t per_pos = values_per_position();
  if (out.size() != compressed.size() * per_pos) {
    return invalid_argument("ngram hasher: out has " + std::to_string(out.size()) +
                            " entries, expected " + std::to_string(compressed.size() * per_pos));
  }
  const std::size_t keep = static_cast<std::size_t>(max_ngram_size_ - 1);
  if (history.recent.size() > keep) {
    return invalid_argument("ngram hasher: history holds more tokens than max_ngram_size - 1");
  }
  if (holds_pending(history)) return unresolved();
  // Window = carried history followed by this chunk, so look-backs cross chunk borders.
  // The history is shorter than `keep` only near the sequence start, which is exactly
  // when a look-back runs out of tokens.
  std::vector<int32_t> window(history.recent);
  window.insert(window.end(), compressed.begin(), compressed.end());
  const std::size_t base = history.recent.size();

  std::vector<int64_t> shifted(static_cast<std::size_t>(max_ngram_size_));
  const std::size_t n_layers = multipliers_.size();
  const std::size_t buckets = static_cast<std::size_t>(buckets_per_layer());
  for (std::size_t t = 0; t < compressed.size(); ++t) {
    const std::size_t at = base + t;  // index of the current token in `window`
    bool blocked = false;
    for (std::size_t s = 0; s < shifted.size(); ++s) {
      blocked = blocked || s > at || window[at - s] < 0;
      shifted[s] = blocked ? pad_ : window[at - s];
    }
    int64_t* row = out.data() + t * per_pos;
    for (std::size_t l = 0; l < n_layers; ++l) {
      kernels::engram::hash_position(shifted.data(), max_ngram_size_, n_heads_,
                                     multipliers_[l].data(), primes_[l].data(), offsets_[l].data(),
                                     row + l * buckets);
    }
  }

  // Keep the newest `keep` tokens for the next chunk.
  const std::size_t drop = window.size() > keep ? window.size() - keep : 0;
  history.recent.assign(window.begin() + static_cast<std::ptrdiff_t>(drop), window.end());
  history.position += static_cast<int64_t>(compressed.size());
  return Status::ok_status();
}

Status NgramHasher::look_back_pending(NgramHistory& history, std::span<int32_t> look_back) const {
  const std::size_t keep = static_cast<std::size_t>(max_ngram_size_ - 1);
  if (look_back.size() != keep) {
    return invalid_argument("ngram hasher: look_back has " + std::to_string(look_back.size()) +
                            " entries, expected " + std::to_string(keep));
  }
  if (history.recent.size() > keep) {
    return invalid_argument("ngram hasher: history holds more tokens than max_ngram_size - 1");
  }
  if (holds_pending(history)) return unresolved();
  // Look-back s is recent[size - s] (newest last); past the start or from a dead token on, pad.
  const std::size_t have = history.recent.size();
  bool blocked = false;
  for (std::size_t s = 1; s <= keep; ++s) {
    blocked = blocked || s > have || history.recent[have - s] < 0;
    look_back[s - 1] = blocked ? pad_ : history.recent[have - s];
  }
  history.recent.push_back(kPendingToken);
  if (history.recent.size() > keep) history.recent.erase(history.recent.begin());
  history.position += 1;
  return Status::ok_status();
}

bool NgramHasher::holds_pending(const NgramHistory& history) {
  return std::find(history.recent.begin(), history.recent.end(), kPendingToken) !=
         history.recent.end();
}

Status NgramHasher::resolve_pending(NgramHistory& history, int32_t compressed) {
  auto it = std::find(history.recent.begin(), history.recent.end(), kPendingToken);
  if (it == history.recent.end()) {
    return invalid_argument("ngram hasher: no pending token to resolve");
  }
  *it = compressed;
  return Status::ok_status();
}

Status compress_tokens(std::span<const int32_t> lookup,
                       std::span<const int32_t> token_ids,
                       std::span<int32_t> out) {
  if (out.size() != token_ids.size()) {
    return invalid_argument("compress_tokens: out size differs from the number of tokens");
  }
  for (std::size_t i = 0; i < token_ids.size(); ++i) {
    const int32_t id = token_ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= lookup.size()) {
      return out_of_range("compress_tokens: token id " + std::to_string(id) +
                          " outside the token map of " + std::to_string(lookup.size()));
    }
    out[i] = lookup[static_cast<std::size_t>(id)];
  }
  return Status::ok_status();
}

}  // namespace di::engram
