// Prefix caching over V4.1's state (issue #4 item 4; docs/engine.md "Prefix caching").
//
// What is reusable, and how:
// - Compressed KV and index keys are append-only per sequence: a block of block_tokens() prompt
//   tokens (StatePool::prefix_alignment(): every stream's entries end on a page boundary and no
//   compressor group is pending) owns whole pages, shared by reference count. Blocks are content
//   addressed by a hash chain (XXH3-128 over the parent block's hash, the block index and its
//   tokens) and the tokens are compared on every hit, so a hash collision can never serve wrong
//   state.
// - The window rings (every layer's last window_size K=V rows) and the Engram look-back are not
//   recomputable from the compressed entries, so a hit needs a stored snapshot of them taken
//   exactly at the block boundary. Snapshots live in a fixed pool (LRU): at the last aligned
//   boundary of each prompt that a hit may use, at power-of-two multiples of the block (shared
//   system prompts) and, during decode, at the newest boundary of each sequence (multi-turn chat
//   re-sends prompt + reply).
// A hit restores pages + snapshot and the forward continues from the boundary: exactly the state
// a chunked prefill split there would hold, so logits are bitwise those of a run without the
// cache (chunked == one-shot). With SWA bounded replay the late layers' windows in a snapshot may
// be partial, so hits stop at the request's replay point, which keeps that mode bitwise too.
// Not thread-safe: the engine's owner thread is the only caller.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/engram/ngram_hasher.h"
#include "model/state_pool.h"

struct XXH3_state_s;  // xxhash.h, kept out of this header

namespace di::engine {

struct PrefixCacheStats {
  int64_t query_tokens = 0;  // tokens of admitted sequences looked up
  int64_t hit_tokens = 0;    // of which restored from the cache
  int64_t num_hits = 0;      // admissions that restored something
  int64_t num_lookups = 0;
  int64_t num_blocks = 0;  // blocks cached now
  int64_t num_snapshots = 0;
  int64_t evicted_blocks = 0;
};

// Where a live sequence's publishing stands (the engine keeps one per sequence).
struct PrefixCursor {
  int64_t end = 0;                 // tokens covered by published blocks
  int32_t block = -1;              // the block ending at `end`
  uint64_t generation = 0;         // blocks_[block].generation when set
  int32_t decode_snapshot = -1;    // block holding the snapshot this sequence took in decode
  uint64_t decode_generation = 0;  // its generation
};

class PrefixCache {
 public:
  // `num_snapshots` slots of StatePool::window_floats() floats each, allocated here, once.
  PrefixCache(model::StatePool& pool, int num_snapshots);

  int64_t block_tokens() const { return block_tokens_; }
  int num_snapshot_slots() const { return static_cast<int>(snapshot_owner_.size()); }

  // Restores into the fresh `seq` the longest cached prefix of `tokens` that ends at a snapshot
  // and is at most `max_tokens` long; returns its length (0: a miss, `seq` untouched).
  // `bounded_replay`: the late layers' windows are not taken from the snapshot (see above).
  int64_t restore(std::span<const int32_t> tokens,
                  int64_t max_tokens,
                  bool bounded_replay,
                  model::SequenceState& seq);

  // What restore() would restore now, without restoring or touching anything.
  int64_t cached_prefix(std::span<const int32_t> tokens, int64_t max_tokens) const;

  // Publishes the whole blocks of `seq`'s computed positions (seq.num_tokens) not yet published.
  // `snapshot`: also store the windows at seq.num_tokens, which must be a block boundary;
  // `decode`: the snapshot replaces the one this sequence took before in decode.
  void publish(std::span<const int32_t> tokens,
               const model::SequenceState& seq,
               PrefixCursor& cursor,
               bool snapshot,
               bool decode);

  // Drops the least recently used block whose pages only the cache holds and that no cached
  // block extends; false when no such block exists (nothing more can be freed).
  bool evict_one();

  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Key {
    uint64_t lo = 0, hi = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.lo); }
  };
  struct Block {
    Key key;
    int32_t parent = -1;
    int64_t end = 0;  // tokens covered from the sequence start
    std::vector<int32_t> tokens;
    std::vector<std::vector<int32_t>> pages;  // per stream
    int32_t snapshot = -1;
    int32_t num_children = 0;
    uint64_t last_used = 0;
    uint64_t generation = 0;  // bumped when the block is freed, invalidating cursors
    bool live = false;
  };

  // The hasher's state is scratch, not observable state, hence const.
  Key chain_key(const Key& parent, int64_t index, std::span<const int32_t> tokens) const;
  // The cached blocks continuing from the start of `tokens` within `max_tokens`, and how many of
  // them end at the deepest snapshot (0: none).
  size_t walk(std::span<const int32_t> tokens,
              int64_t max_tokens,
              std::vector<int32_t>& chain) const;
  // The cached block continuing `parent` with `tokens` at block `index`, or -1.
  int32_t find(int32_t parent, const Key& key, std::span<const int32_t> tokens) const;
  int32_t add_block(int32_t parent,
                    const Key& key,
                    int64_t index,
                    std::span<const int32_t> tokens,
                    const model::SequenceState& seq);
  void free_block(int32_t id);
  int32_t take_snapshot_slot();  // evicts the least recently used snapshot when all are taken
  void drop_snapshot(int32_t block);
  void touch(int32_t block);

  model::StatePool& pool_;
  // xxHash's streaming state, opaque outside its static-linking API: created once, reused.
  std::unique_ptr<XXH3_state_s, void (*)(XXH3_state_s*)> hasher_;
  int64_t block_tokens_ = 0;
  int64_t window_floats_ = 0;
  uint64_t tick_ = 0;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_blocks_;
  std::unordered_map<Key, int32_t, KeyHash> index_;
  // Snapshot slots: window rings, Engram look-back, late-window validity, owner block.
  std::vector<float> snapshot_windows_;
  std::vector<engram::NgramHistory> snapshot_history_;
  std::vector<int64_t> snapshot_late_valid_from_;
  std::vector<int32_t> snapshot_owner_;
  std::vector<uint64_t> snapshot_last_used_;
  PrefixCacheStats stats_;
};

}  // namespace di::engine
