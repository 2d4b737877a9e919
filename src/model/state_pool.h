// Per-sequence V4.1 state in fixed-layout pools sized once at start-up (spec §1.2-1.3): a window
// ring of `window_size` K=V rows per layer and sequence slot, and, per KV source layer, paged
// compressed-KV rows and index-key rows addressed by (page, offset). Window rows are stored in
// FP8 and compressed-KV rows in FP4 (backend/kv_format.h: exactly the fake-quantized values the
// reference keeps), written and read only by backend ops; index keys are fp32 rows. Nothing grows
// by concatenation; a sequence holds page tables and Engram look-back tokens, and its slot owns
// the compressor's carry rows (the partial group, in backend memory). The engine's scheduler and
// prefix cache build on this layout.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/memory.h"
#include "model/config.h"
#include "model/engram/ngram_hasher.h"
#include "util/status.h"

namespace di::model {

// Rows of `row_bytes` bytes (a multiple of 4) in pages of `rows_per_page`, with a free list.
// Pages are reference counted so that the prefix cache and several sequences can share a cached
// prefix's pages: a page returns to the free list when its last holder releases it.
class PagedRowPool {
 public:
  PagedRowPool() = default;
  // Rows live in `memory` (the backend's), zero-filled.
  PagedRowPool(const backend::Memory& memory, int64_t num_pages, int rows_per_page, int row_bytes);
  std::optional<int32_t> allocate_page();  // reference count 1
  void retain_page(int32_t page) { ++refs_[static_cast<size_t>(page)]; }
  void release_page(int32_t page);
  int32_t page_refs(int32_t page) const { return refs_[static_cast<size_t>(page)]; }
  // The row's index in data() (rows of row_bytes).
  int32_t row_index(int32_t page, int64_t offset) const {
    return static_cast<int32_t>(static_cast<int64_t>(page) * rows_per_page_ + offset);
  }
  uint8_t* data() const { return reinterpret_cast<uint8_t*>(data_.data()); }
  uint8_t* row(int32_t page, int64_t offset) const {
    return data() + static_cast<int64_t>(row_index(page, offset)) * row_bytes_;
  }
  int rows_per_page() const { return rows_per_page_; }
  int row_bytes() const { return row_bytes_; }
  bool has_memory() const { return data_.data() != nullptr; }
  int64_t num_free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_pages() const { return num_pages_; }

 private:
  int64_t num_pages_ = 0;
  int rows_per_page_ = 0;
  int row_bytes_ = 0;
  backend::Buffer data_;  // [num_pages * rows_per_page, row_bytes / 4] floats holding bytes
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;
};

// One KV source layer's compressed entries for one sequence.
struct CompressedStream {
  std::vector<int32_t> pages;  // shared page ids for the compressed-KV and index-key pools
  int64_t num_entries = 0;
  // (The pending partial group of a ratio > 1 compressor lives in the pool's carry rows, in
  // backend memory: StatePool::carry_kv_rows.)
};

struct SequenceState {
  int32_t slot = -1;       // window-ring slot
  int64_t num_tokens = 0;  // positions already processed
  // Window slots of the late layers (after the last KV source) hold nothing below this position
  // when a prefill skipped them (bounded replay).
  int64_t late_valid_from = 0;
  std::vector<CompressedStream> streams;  // one per config.kv_source_layers entry
  // Engram look-back tokens carried between calls.
  engram::NgramHistory engram_history;
};

struct StatePoolOptions {
  int max_sequences = 4;
  int64_t max_tokens = 16384;  // total positions across live sequences (sizes the page pools)
  int entries_per_page = 64;
};

class StatePool {
 public:
  // Rows (windows, compressed KV, index keys) live in `memory`, the backend's (the model's ops):
  // their pointers are backend memory, moved only through `memory`.
  static Expected<StatePool> create(const ModelConfig& config,
                                    const StatePoolOptions& options,
                                    const backend::Memory& memory);

  // A fresh, empty sequence, or kResourceExhausted when every slot is taken.
  Expected<SequenceState> create_sequence();
  void release_sequence(SequenceState& seq);
  // Allocates the pages `new_tokens` more positions need; nothing changes on failure.
  Status reserve(SequenceState& seq, int64_t new_tokens);

  // Prefix sharing (engine/prefix_cache.h). A prefix is shared at multiples of
  // prefix_alignment() tokens, where every stream's entries end on a page boundary and no
  // compressor group is pending, so the shared pages are never written again.
  int64_t prefix_alignment() const;
  // Page ids of stream `stream` covering entries of positions [begin, end) (aligned bounds).
  std::vector<int32_t> prefix_pages(const SequenceState& seq,
                                    int stream,
                                    int64_t begin,
                                    int64_t end) const;
  void retain_page(int stream, int32_t page) { compressed_kv_[stream].retain_page(page); }
  void release_page(int stream, int32_t page);
  int32_t page_refs(int stream, int32_t page) const {
    return compressed_kv_[stream].page_refs(page);
  }
  // Makes the fresh sequence `seq` hold the first `num_tokens` (aligned) positions' pages
  // `pages[stream]` (retained) with its position at `num_tokens`; windows and carry state come
  // from a snapshot (load_windows) or are the caller's business.
  Status adopt_prefix(SequenceState& seq,
                      const std::vector<std::vector<int32_t>>& pages,
                      int64_t num_tokens);
  // The window rings of one sequence slot (all layers, FP8 rows) as one block of window_floats()
  // 4-byte words, copied to and from host memory (prefix-cache snapshots).
  int64_t window_floats() const { return window_bytes_per_sequence(config_) / 4; }
  void save_windows(const SequenceState& seq, float* dst) const;
  void load_windows(const SequenceState& seq, const float* src);
  int num_streams() const { return static_cast<int>(compressed_kv_.size()); }

  // Window rows: FP8 at kv_row_stride(kFp8, head_dim), every slot's and layer's ring in one pool.
  uint8_t* window_pool() const { return reinterpret_cast<uint8_t*>(windows_.data()); }
  int64_t window_pool_rows() const;
  int32_t window_row_index(const SequenceState& seq, int layer, int64_t position) const;
  // A stream's compressed-KV rows: FP4 at kv_row_stride(kFp4, head_dim).
  uint8_t* compressed_kv_pool(int stream) const { return compressed_kv_[stream].data(); }
  int64_t compressed_kv_pool_rows(int stream) const {
    const PagedRowPool& p = compressed_kv_[stream];
    return p.num_pages() * p.rows_per_page();
  }
  int32_t compressed_kv_row_index(const SequenceState& seq, int stream, int64_t entry) const;
  float* index_key_row(SequenceState& seq, int stream, int64_t entry);
  // A stream's index-key rows (fp32, index_head_dim each), addressed like the compressed KV.
  const float* index_key_pool(int stream) const {
    return reinterpret_cast<const float*>(index_keys_[stream].data());
  }
  // The compressor carry of a ratio > 1 stream for `seq`'s slot: `ratio` fp32 rows of head_dim
  // each for the projected KV and for the gate scores, row i holding position p with
  // p % ratio == i of the group being filled. Backend memory, contiguous, so that a completed
  // group is pooled where it lies.
  float* carry_kv_rows(const SequenceState& seq, int stream) const;
  float* carry_score_rows(const SequenceState& seq, int stream) const;
  int stream_of_layer(int kv_source_layer) const;
  // Host copies of stored rows decoded to the values they hold (checks and tests; waits).
  void download_window_row(const SequenceState& seq, int layer, int64_t position, float* out) const;
  void download_compressed_kv(const SequenceState& seq,
                              int stream,
                              int64_t entry,
                              float* out) const;

  // Bytes of one sequence slot's window rings, and of one compressed entry (its compressed-KV
  // row and its index-key row): what memory planning needs before a pool exists.
  static int64_t window_bytes_per_sequence(const ModelConfig& config);
  // Bytes of one sequence slot's compressor carry rows (every ratio > 1 stream).
  static int64_t carry_bytes_per_sequence(const ModelConfig& config);
  static int64_t entry_bytes(const ModelConfig& config);

  int64_t bytes() const;
  int max_sequences() const { return options_.max_sequences; }
  // Compressed entries per page (the page tables' granularity, for backend-side row lookups).
  int entries_per_page() const { return options_.entries_per_page; }

 private:
  ModelConfig config_;
  StatePoolOptions options_;
  const backend::Memory* memory_ = nullptr;
  int num_ring_layers_ = 0;
  backend::Buffer windows_;  // [max_sequences, num_ring_layers, window_size] FP8 rows
  std::vector<PagedRowPool> compressed_kv_;  // per stream: FP4 rows of head_dim
  std::vector<PagedRowPool> index_keys_;     // per stream: fp32 rows of index_head_dim
  // Per stream (empty at ratio 1): [max_sequences * ratio, head_dim] fp32 carry rows.
  std::vector<backend::Buffer> carry_kv_, carry_score_;
  std::vector<int32_t> free_slots_;
};

}  // namespace di::model
