#include "model/state_pool.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "backend/kv_format.h"
#include "kernels/ref/kv_codec.h"
#include "util/check.h"

namespace di::model {

namespace {
using backend::KvFormat;
constexpr int64_t kFloat = 4;
}  // namespace

PagedRowPool::PagedRowPool(const backend::Memory& memory,
                           int64_t num_pages,
                           int rows_per_page,
                           int row_bytes)
    : num_pages_(num_pages),
      rows_per_page_(rows_per_page),
      row_bytes_(row_bytes),
      data_(memory, num_pages * rows_per_page, row_bytes / 4),
      refs_(static_cast<size_t>(num_pages), 0) {
  if (data_.data()) memory.fill(data_.data(), 0.0f, data_.size());
  free_.reserve(static_cast<size_t>(num_pages));
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

std::optional<int32_t> PagedRowPool::allocate_page() {
  if (free_.empty()) return std::nullopt;
  int32_t p = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(p)] = 1;
  return p;
}

void PagedRowPool::release_page(int32_t page) {
  DI_CHECK(refs_[static_cast<size_t>(page)] > 0);
  if (--refs_[static_cast<size_t>(page)] == 0) free_.push_back(page);
}

Expected<StatePool> StatePool::create(const ModelConfig& config,
                                      const StatePoolOptions& options,
                                      const backend::Memory& memory) {
  if (options.max_sequences <= 0 || options.max_tokens <= 0 || options.entries_per_page <= 0) {
    return invalid_argument(
        "state pool: max_sequences, max_tokens and entries_per_page must be > 0");
  }
  if (config.head_dim <= 0 || config.head_dim % 32 != 0) {
    return invalid_argument("state pool: the FP8/FP4 KV rows need head_dim % 32 == 0");
  }
  StatePool pool;
  pool.config_ = config;
  pool.options_ = options;
  pool.memory_ = &memory;
  pool.num_ring_layers_ = config.num_total_layers();
  pool.windows_ =
      backend::Buffer(memory, options.max_sequences, window_bytes_per_sequence(config) / kFloat);
  if (!pool.windows_.data()) return resource_exhausted("state pool: out of backend memory");
  memory.fill(pool.windows_.data(), 0.0f, pool.windows_.size());
  for (int s : config.kv_source_layers) {
    const int ratio = config.compress_ratios[s];
    // Each live sequence can waste at most one partly filled page per stream.
    const int64_t entries = options.max_tokens / ratio;
    const int64_t pages =
        (entries + options.entries_per_page - 1) / options.entries_per_page + options.max_sequences;
    pool.compressed_kv_.emplace_back(
        memory, pages, options.entries_per_page,
        static_cast<int>(backend::kv_row_stride(KvFormat::kFp4, config.head_dim)));
    pool.index_keys_.emplace_back(memory, pages, options.entries_per_page,
                                  static_cast<int>(config.index_head_dim * kFloat));
    if (!pool.compressed_kv_.back().has_memory() || !pool.index_keys_.back().has_memory()) {
      return resource_exhausted("state pool: out of backend memory");
    }
    const int64_t carry_rows = ratio > 1 ? int64_t{options.max_sequences} * ratio : 0;
    pool.carry_kv_.emplace_back();
    pool.carry_score_.emplace_back();
    if (carry_rows > 0) {
      pool.carry_kv_.back() = backend::Buffer(memory, carry_rows, config.head_dim);
      pool.carry_score_.back() = backend::Buffer(memory, carry_rows, config.head_dim);
      if (!pool.carry_kv_.back().data() || !pool.carry_score_.back().data()) {
        return resource_exhausted("state pool: out of backend memory");
      }
      memory.fill(pool.carry_kv_.back().data(), 0.0f, pool.carry_kv_.back().size());
      memory.fill(pool.carry_score_.back().data(), 0.0f, pool.carry_score_.back().size());
    }
  }
  for (int i = options.max_sequences - 1; i >= 0; --i) pool.free_slots_.push_back(i);
  return pool;
}

Expected<SequenceState> StatePool::create_sequence() {
  if (free_slots_.empty()) {
    return resource_exhausted("state pool: all " + std::to_string(options_.max_sequences) +
                              " sequence slots are in use");
  }
  SequenceState seq;
  seq.slot = free_slots_.back();
  free_slots_.pop_back();
  // The slot's carry rows keep a released sequence's values: a fresh sequence writes every row
  // of a group before the group is pooled.
  seq.streams.resize(config_.kv_source_layers.size());
  return seq;
}

void StatePool::release_sequence(SequenceState& seq) {
  if (seq.slot < 0) return;
  for (size_t i = 0; i < seq.streams.size(); ++i) {
    for (int32_t p : seq.streams[i].pages) release_page(static_cast<int>(i), p);
    seq.streams[i].pages.clear();
  }
  free_slots_.push_back(seq.slot);
  seq.slot = -1;
}

Status StatePool::reserve(SequenceState& seq, int64_t new_tokens) {
  const int64_t end = seq.num_tokens + new_tokens;
  if (end > config_.max_seq_len) {
    return out_of_range("sequence of " + std::to_string(end) + " tokens exceeds max_seq_len " +
                        std::to_string(config_.max_seq_len));
  }
  std::vector<int64_t> need(seq.streams.size());
  for (size_t i = 0; i < seq.streams.size(); ++i) {
    const int ratio = config_.compress_ratios[config_.kv_source_layers[i]];
    const int64_t entries = end / ratio;
    const int64_t pages = (entries + options_.entries_per_page - 1) / options_.entries_per_page;
    need[i] = std::max<int64_t>(0, pages - static_cast<int64_t>(seq.streams[i].pages.size()));
    if (need[i] > compressed_kv_[i].num_free_pages()) {
      return resource_exhausted("state pool: no free compressed-KV pages for layer " +
                                std::to_string(config_.kv_source_layers[i]));
    }
  }
  for (size_t i = 0; i < seq.streams.size(); ++i) {
    for (int64_t k = 0; k < need[i]; ++k) {
      // Both pools allocate in lockstep, so one page id addresses both.
      int32_t p = *compressed_kv_[i].allocate_page();
      index_keys_[i].allocate_page();
      seq.streams[i].pages.push_back(p);
    }
  }
  return Status();
}

int64_t StatePool::window_pool_rows() const {
  return static_cast<int64_t>(options_.max_sequences) * num_ring_layers_ * config_.window_size;
}

int32_t StatePool::window_row_index(const SequenceState& seq, int layer, int64_t position) const {
  const int64_t w = config_.window_size;
  return static_cast<int32_t>((static_cast<int64_t>(seq.slot) * num_ring_layers_ + layer) * w +
                              position % w);
}

int32_t StatePool::compressed_kv_row_index(const SequenceState& seq,
                                           int stream,
                                           int64_t entry) const {
  const int64_t per = options_.entries_per_page;
  return compressed_kv_[stream].row_index(seq.streams[stream].pages[entry / per], entry % per);
}

float* StatePool::index_key_row(SequenceState& seq, int stream, int64_t entry) {
  const int64_t per = options_.entries_per_page;
  return reinterpret_cast<float*>(
      index_keys_[stream].row(seq.streams[stream].pages[entry / per], entry % per));
}

namespace {
// Downloads one stored row (stride bytes, a multiple of 4) and decodes it.
void download_row(const backend::Memory& memory,
                  const uint8_t* row,
                  int64_t stride,
                  int64_t dim,
                  KvFormat format,
                  float* out) {
  std::vector<float> words(static_cast<size_t>(stride / kFloat));
  memory.download(reinterpret_cast<const float*>(row), words.data(), stride / kFloat);
  kernels::decode_kv_row(reinterpret_cast<const uint8_t*>(words.data()), dim, format, out);
}
}  // namespace

void StatePool::download_window_row(const SequenceState& seq,
                                    int layer,
                                    int64_t position,
                                    float* out) const {
  const int64_t stride = backend::kv_row_stride(KvFormat::kFp8, config_.head_dim);
  download_row(*memory_, window_pool() + window_row_index(seq, layer, position) * stride, stride,
               config_.head_dim, KvFormat::kFp8, out);
}

void StatePool::download_compressed_kv(const SequenceState& seq,
                                       int stream,
                                       int64_t entry,
                                       float* out) const {
  const int64_t stride = backend::kv_row_stride(KvFormat::kFp4, config_.head_dim);
  download_row(*memory_,
               compressed_kv_pool(stream) + compressed_kv_row_index(seq, stream, entry) * stride,
               stride, config_.head_dim, KvFormat::kFp4, out);
}

void StatePool::release_page(int stream, int32_t page) {
  compressed_kv_[stream].release_page(page);
  // The index-key pool allocates in lockstep and keeps its count at 1 until the page is free.
  if (compressed_kv_[stream].page_refs(page) == 0) index_keys_[stream].release_page(page);
}

int64_t StatePool::prefix_alignment() const {
  int64_t ratios = 1;
  for (int layer : config_.kv_source_layers) {
    ratios = std::lcm(ratios, static_cast<int64_t>(config_.compress_ratios[layer]));
  }
  return ratios * options_.entries_per_page;
}

std::vector<int32_t> StatePool::prefix_pages(const SequenceState& seq,
                                             int stream,
                                             int64_t begin,
                                             int64_t end) const {
  const int64_t ratio = config_.compress_ratios[config_.kv_source_layers[stream]];
  const int64_t per = options_.entries_per_page;
  const auto& pages = seq.streams[static_cast<size_t>(stream)].pages;
  return {pages.begin() + begin / ratio / per, pages.begin() + end / ratio / per};
}

Status StatePool::adopt_prefix(SequenceState& seq,
                               const std::vector<std::vector<int32_t>>& pages,
                               int64_t num_tokens) {
  if (seq.num_tokens != 0 || num_tokens % prefix_alignment() != 0 ||
      pages.size() != seq.streams.size()) {
    return invalid_argument("adopt_prefix: needs a fresh sequence and an aligned prefix");
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    const int64_t ratio = config_.compress_ratios[config_.kv_source_layers[i]];
    if (static_cast<int64_t>(pages[i].size()) * options_.entries_per_page * ratio != num_tokens) {
      return invalid_argument("adopt_prefix: page count does not cover the prefix");
    }
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    const int64_t ratio = config_.compress_ratios[config_.kv_source_layers[i]];
    for (int32_t p : pages[i]) retain_page(static_cast<int>(i), p);
    seq.streams[i].pages = pages[i];
    seq.streams[i].num_entries = num_tokens / ratio;
  }
  seq.num_tokens = num_tokens;
  return Status();
}

void StatePool::save_windows(const SequenceState& seq, float* dst) const {
  memory_->download(windows_.data() + seq.slot * window_floats(), dst, window_floats());
}

void StatePool::load_windows(const SequenceState& seq, const float* src) {
  memory_->upload(src, windows_.data() + seq.slot * window_floats(), window_floats());
}

int StatePool::stream_of_layer(int kv_source_layer) const {
  for (size_t i = 0; i < config_.kv_source_layers.size(); ++i) {
    if (config_.kv_source_layers[i] == kv_source_layer) return static_cast<int>(i);
  }
  return -1;
}

int64_t StatePool::window_bytes_per_sequence(const ModelConfig& config) {
  return static_cast<int64_t>(config.num_total_layers()) * config.window_size *
         backend::kv_row_stride(KvFormat::kFp8, config.head_dim);
}

int64_t StatePool::entry_bytes(const ModelConfig& config) {
  return backend::kv_row_stride(KvFormat::kFp4, config.head_dim) + config.index_head_dim * kFloat;
}

float* StatePool::carry_kv_rows(const SequenceState& seq, int stream) const {
  const int ratio = config_.compress_ratios[config_.kv_source_layers[static_cast<size_t>(stream)]];
  return carry_kv_[static_cast<size_t>(stream)].row(static_cast<int64_t>(seq.slot) * ratio);
}

float* StatePool::carry_score_rows(const SequenceState& seq, int stream) const {
  const int ratio = config_.compress_ratios[config_.kv_source_layers[static_cast<size_t>(stream)]];
  return carry_score_[static_cast<size_t>(stream)].row(static_cast<int64_t>(seq.slot) * ratio);
}

int64_t StatePool::carry_bytes_per_sequence(const ModelConfig& config) {
  int64_t total = 0;
  for (int s : config.kv_source_layers) {
    const int ratio = config.compress_ratios[static_cast<size_t>(s)];
    if (ratio > 1) total += 2 * int64_t{ratio} * config.head_dim * kFloat;
  }
  return total;
}

int64_t StatePool::bytes() const {
  int64_t total =
      windows_.size() * kFloat + options_.max_sequences * carry_bytes_per_sequence(config_);
  for (const PagedRowPool& p : compressed_kv_)
    total += p.num_pages() * p.rows_per_page() * entry_bytes(config_);
  return total;
}

}  // namespace di::model
