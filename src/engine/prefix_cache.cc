#include "engine/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <limits>

#include "util/check.h"

namespace di::engine {

PrefixCache::PrefixCache(model::StatePool& pool, int num_snapshots)
    : pool_(pool),
      hasher_(XXH3_createState(), [](XXH3_state_t* s) { XXH3_freeState(s); }),
      block_tokens_(pool.prefix_alignment()),
      window_floats_(pool.window_floats()) {
  const auto n = static_cast<size_t>(std::max(0, num_snapshots));
  snapshot_windows_.assign(n * static_cast<size_t>(window_floats_), 0.0f);
  snapshot_history_.resize(n);
  snapshot_late_valid_from_.assign(n, 0);
  snapshot_owner_.assign(n, -1);
  snapshot_last_used_.assign(n, 0);
}

PrefixCache::Key PrefixCache::chain_key(const Key& parent,
                                        int64_t index,
                                        std::span<const int32_t> tokens) const {
  XXH3_state_t* state = hasher_.get();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, &parent, sizeof(parent));
  XXH3_128bits_update(state, &index, sizeof(index));
  XXH3_128bits_update(state, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  return Key{h.low64, h.high64};
}

int32_t PrefixCache::find(int32_t parent, const Key& key, std::span<const int32_t> tokens) const {
  auto it = index_.find(key);
  if (it == index_.end()) return -1;
  const Block& b = blocks_[static_cast<size_t>(it->second)];
  // A hash match is only a candidate: the chain and the tokens themselves must match.
  if (b.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end())) {
    return -1;
  }
  return it->second;
}

void PrefixCache::touch(int32_t block) {
  // Ancestors are touched no later than descendants, so the least recently used block with no
  // children is where eviction starts.
  blocks_[static_cast<size_t>(block)].last_used = ++tick_;
}

size_t PrefixCache::walk(std::span<const int32_t> tokens,
                         int64_t max_tokens,
                         std::vector<int32_t>& chain) const {
  chain.clear();
  if (snapshot_owner_.empty()) return 0;
  int32_t parent = -1;
  Key key;
  size_t best = 0;
  for (int64_t k = 0; (k + 1) * block_tokens_ <= max_tokens; ++k) {
    const auto part =
        tokens.subspan(static_cast<size_t>(k * block_tokens_), static_cast<size_t>(block_tokens_));
    key = chain_key(key, k, part);
    const int32_t id = find(parent, key, part);
    if (id < 0) break;
    chain.push_back(id);
    parent = id;
    if (blocks_[static_cast<size_t>(id)].snapshot >= 0) best = chain.size();
  }
  return best;
}

int64_t PrefixCache::cached_prefix(std::span<const int32_t> tokens, int64_t max_tokens) const {
  std::vector<int32_t> chain;
  const size_t best = walk(tokens, max_tokens, chain);
  return best == 0 ? 0 : blocks_[static_cast<size_t>(chain[best - 1])].end;
}

int64_t PrefixCache::restore(std::span<const int32_t> tokens,
                             int64_t max_tokens,
                             bool bounded_replay,
                             model::SequenceState& seq) {
  stats_.num_lookups++;
  stats_.query_tokens += static_cast<int64_t>(tokens.size());
  if (snapshot_owner_.empty()) return 0;
  std::vector<int32_t> chain;
  const size_t best = walk(tokens, max_tokens, chain);
  if (best == 0) return 0;
  chain.resize(best);
  const Block& last = blocks_[static_cast<size_t>(chain.back())];
  std::vector<std::vector<int32_t>> pages(static_cast<size_t>(pool_.num_streams()));
  for (int32_t id : chain) {
    touch(id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    for (size_t s = 0; s < pages.size(); ++s) {
      pages[s].insert(pages[s].end(), b.pages[s].begin(), b.pages[s].end());
    }
  }
  if (!pool_.adopt_prefix(seq, pages, last.end).ok()) return 0;  // cannot happen: aligned
  const auto slot = static_cast<size_t>(last.snapshot);
  snapshot_last_used_[slot] = tick_;
  pool_.load_windows(seq, snapshot_windows_.data() + slot * static_cast<size_t>(window_floats_));
  seq.engram_history = snapshot_history_[slot];
  // Bounded replay: what a prefill chunk ending here would have left (no late-layer windows).
  seq.late_valid_from = bounded_replay ? last.end : snapshot_late_valid_from_[slot];
  stats_.num_hits++;
  stats_.hit_tokens += last.end;
  return last.end;
}

int32_t PrefixCache::add_block(int32_t parent,
                               const Key& key,
                               int64_t index,
                               std::span<const int32_t> tokens,
                               const model::SequenceState& seq) {
  int32_t id;
  if (!free_blocks_.empty()) {
    id = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    id = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  b.key = key;
  b.parent = parent;
  b.end = (index + 1) * block_tokens_;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.pages.resize(static_cast<size_t>(pool_.num_streams()));
  for (int s = 0; s < pool_.num_streams(); ++s) {
    b.pages[static_cast<size_t>(s)] = pool_.prefix_pages(seq, s, b.end - block_tokens_, b.end);
    for (int32_t p : b.pages[static_cast<size_t>(s)]) pool_.retain_page(s, p);
  }
  b.snapshot = -1;
  b.num_children = 0;
  b.live = true;
  if (parent >= 0) blocks_[static_cast<size_t>(parent)].num_children++;
  index_[key] = id;
  touch(id);
  stats_.num_blocks++;
  return id;
}

void PrefixCache::publish(std::span<const int32_t> tokens,
                          const model::SequenceState& seq,
                          PrefixCursor& cursor,
                          bool snapshot,
                          bool decode) {
  if (snapshot_owner_.empty()) return;
  const int64_t full = seq.num_tokens / block_tokens_;
  auto valid = [&](int32_t id, uint64_t generation) {
    return id >= 0 && blocks_[static_cast<size_t>(id)].live &&
           blocks_[static_cast<size_t>(id)].generation == generation;
  };
  // An evicted cursor block restarts the walk; the sequence still holds every page it needs to
  // publish its whole chain again.
  if (cursor.end > 0 && !valid(cursor.block, cursor.generation)) cursor = PrefixCursor{};
  Key key = cursor.block >= 0 ? blocks_[static_cast<size_t>(cursor.block)].key : Key{};
  for (int64_t k = cursor.end / block_tokens_; k < full; ++k) {
    const auto part =
        tokens.subspan(static_cast<size_t>(k * block_tokens_), static_cast<size_t>(block_tokens_));
    key = chain_key(key, k, part);
    int32_t id = find(cursor.block, key, part);
    if (id < 0) {
      // An equal key with another chain or tokens (a collision) is left alone, not replaced.
      if (index_.contains(key)) return;
      id = add_block(cursor.block, key, k, part, seq);
    } else {
      touch(id);
    }
    cursor.block = id;
    cursor.generation = blocks_[static_cast<size_t>(id)].generation;
    cursor.end = (k + 1) * block_tokens_;
  }
  if (!snapshot || cursor.end != seq.num_tokens || cursor.end == 0) return;
  Block& b = blocks_[static_cast<size_t>(cursor.block)];
  if (b.snapshot >= 0) {
    snapshot_last_used_[static_cast<size_t>(b.snapshot)] = ++tick_;
    return;
  }
  if (decode && valid(cursor.decode_snapshot, cursor.decode_generation)) {
    drop_snapshot(cursor.decode_snapshot);
  }
  const int32_t slot = take_snapshot_slot();
  const auto s = static_cast<size_t>(slot);
  pool_.save_windows(seq, snapshot_windows_.data() + s * static_cast<size_t>(window_floats_));
  snapshot_history_[s] = seq.engram_history;
  snapshot_late_valid_from_[s] = seq.late_valid_from;
  snapshot_owner_[s] = cursor.block;
  snapshot_last_used_[s] = ++tick_;
  b.snapshot = slot;
  stats_.num_snapshots++;
  if (decode) {
    cursor.decode_snapshot = cursor.block;
    cursor.decode_generation = b.generation;
  }
}

int32_t PrefixCache::take_snapshot_slot() {
  size_t victim = 0;
  for (size_t s = 0; s < snapshot_owner_.size(); ++s) {
    if (snapshot_owner_[s] < 0) return static_cast<int32_t>(s);
    if (snapshot_last_used_[s] < snapshot_last_used_[victim]) victim = s;
  }
  drop_snapshot(snapshot_owner_[victim]);
  return static_cast<int32_t>(victim);
}

void PrefixCache::drop_snapshot(int32_t block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.snapshot < 0) return;
  snapshot_owner_[static_cast<size_t>(b.snapshot)] = -1;
  b.snapshot = -1;
  stats_.num_snapshots--;
}

void PrefixCache::free_block(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  DI_CHECK(b.live && b.num_children == 0);
  drop_snapshot(id);
  for (int s = 0; s < pool_.num_streams(); ++s) {
    for (int32_t p : b.pages[static_cast<size_t>(s)]) pool_.release_page(s, p);
  }
  if (b.parent >= 0) blocks_[static_cast<size_t>(b.parent)].num_children--;
  index_.erase(b.key);
  b.live = false;
  b.generation++;
  free_blocks_.push_back(id);
  stats_.num_blocks--;
  stats_.evicted_blocks++;
}

bool PrefixCache::evict_one() {
  int32_t victim = -1;
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.live || b.num_children > 0 || b.last_used >= oldest) continue;
    // Evicting a block that a live sequence also holds would free no memory.
    bool cache_only = true;
    for (int s = 0; s < pool_.num_streams() && cache_only; ++s) {
      for (int32_t p : b.pages[static_cast<size_t>(s)]) {
        if (pool_.page_refs(s, p) != 1) {
          cache_only = false;
          break;
        }
      }
    }
    if (!cache_only) continue;
    victim = static_cast<int32_t>(i);
    oldest = b.last_used;
  }
  if (victim < 0) return false;
  free_block(victim);
  return true;
}

}  // namespace di::engine
