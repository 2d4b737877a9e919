#include "cli/bench_context.h"

#include <algorithm>
#include <random>

#include "backend/memory.h"
#include "tensor/numeric.h"

namespace di::cli {

namespace {

constexpr int64_t kTemplateRows = 4096;  // random rows reused across entries and sequences

backend::Buffer random_rows(const backend::Ops& ops, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(rows * cols));
  for (auto& x : h) x = round_bf16(d(rng));
  return backend::upload_rows(ops, h, cols);
}

}  // namespace

Status fill_synthetic_context(const backend::Ops& ops,
                              const model::ModelConfig& c,
                              model::StatePool& pool,
                              std::vector<model::SequenceState>& seqs,
                              int64_t tokens,
                              uint32_t seed) {
  for (int layer : c.kv_source_layers) {
    if (tokens % c.compress_ratios[static_cast<size_t>(layer)] != 0) {
      return invalid_argument("--context must be a multiple of every compress ratio");
    }
  }
  const int64_t D = c.head_dim, Di = c.index_head_dim, win = c.window_size;
  const int layers = c.num_total_layers();
  const backend::Buffer window_rows = random_rows(ops, layers * win, D, seed);
  const backend::Buffer kv_rows = random_rows(ops, kTemplateRows, D, seed + 1);
  // Index keys as the compressor stores them: FP4 fake-quantized (kUe8m0Block32) fp32 rows.
  const backend::Buffer key_rows = random_rows(ops, kTemplateRows, Di, seed + 2);
  ops.fake_quant_fp4(key_rows.view(), backend::Fp4ScaleKind::kUe8m0Block32);
  std::vector<int32_t> slots;
  for (model::SequenceState& seq : seqs) {
    DI_RETURN_IF_ERROR(pool.reserve(seq, tokens));
    // The ring slots of positions tokens - win .. tokens - 1 of every layer.
    slots.clear();
    for (int l = 0; l < layers; ++l) {
      for (int64_t i = 0; i < win; ++i) {
        const int64_t p = tokens - win + i;
        slots.push_back(p < 0 ? -1 : pool.window_row_index(seq, l, p));
      }
    }
    ops.write_kv(window_rows.view(), backend::KvFormat::kFp8, slots.data(), pool.window_pool());
    for (int s = 0; s < pool.num_streams(); ++s) {
      const int ratio =
          c.compress_ratios[static_cast<size_t>(c.kv_source_layers[static_cast<size_t>(s)])];
      const int64_t entries = tokens / ratio;
      for (int64_t e0 = 0; e0 < entries; e0 += kTemplateRows) {
        const int64_t n = std::min(kTemplateRows, entries - e0);
        slots.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          slots[static_cast<size_t>(i)] = pool.compressed_kv_row_index(seq, s, e0 + i);
        ops.write_kv({kv_rows.data(), n, D}, backend::KvFormat::kFp4, slots.data(),
                     pool.compressed_kv_pool(s));
      }
      // Index keys: a page's rows are contiguous.
      const int64_t per = pool.entries_per_page();
      if (per > kTemplateRows) return invalid_argument("synthetic context: pages too large");
      for (int64_t e0 = 0; e0 < entries; e0 += per) {
        const int64_t n = std::min(per, entries - e0);
        ops.copy(key_rows.row((e0 / per) % (kTemplateRows / per) * per),
                 pool.index_key_row(seq, s, e0), n * Di);
      }
      seq.streams[static_cast<size_t>(s)].num_entries = entries;
    }
    seq.num_tokens = tokens;
  }
  return ops.status();
}

double decode_kv_bytes(const model::ModelConfig& c, int64_t context) {
  using backend::KvFormat;
  double bytes = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    bytes += static_cast<double>(std::min<int64_t>(c.window_size, context)) *
             static_cast<double>(backend::kv_row_stride(KvFormat::kFp8, c.head_dim));
    const int ratio = c.compress_ratios[static_cast<size_t>(l)];
    if (ratio <= 0) continue;
    const int64_t entries = context / ratio;
    bytes += static_cast<double>(std::min<int64_t>(c.index_topk, entries)) *
             static_cast<double>(backend::kv_row_stride(KvFormat::kFp4, c.head_dim));
    if (c.is_index_source(l)) bytes += static_cast<double>(entries) * 4.0 * c.index_head_dim;
  }
  return bytes;
}

}  // namespace di::cli
