// Attention of one layer (spec §1.3; reference Attention.forward): low-rank q, the shared K=V
// latent in an FP8 sliding window, and for ratio > 0 the compressed entries chosen by the indexer;
// sink softmax; inverse RoPE on the output; grouped low-rank output projection.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/model.h"
#include "tensor/numeric.h"

namespace di::model {

void Model::output_projection(int layer, RowsView o, RowsView out) const {
  const AttentionWeights& a = weights_.layers[static_cast<size_t>(layer)].attn;
  const int64_t T = o.rows;
  const int64_t groups = config_.o_groups, rank = config_.o_lora_rank;
  const int64_t in = o.cols / groups;
  // wo_a is block-diagonal over groups: group g maps its heads' values to `rank` outputs (bf16).
  Buffer grouped(*ops_, T, groups * rank);
  const WeightView wo_a{WeightFormat::kBF16, groups * rank, in,
                        reinterpret_cast<const uint8_t*>(a.wo_a.data()), nullptr};
  ops_->grouped_linear(o, wo_a, static_cast<int>(groups), grouped.view(), true);
  ops_->linear(grouped.view(), a.wo_b, out, true);
}

void Model::project_qkv_linear(int layer, ConstRowsView u, QkvRows& r) const {
  const AttentionWeights& a = weights_.layers[static_cast<size_t>(layer)].attn;
  const ModelConfig& c = config_;
  RowsView qr_v = r.qr, q_v = r.q, kv_v = r.kv;
  ops_->linear_pair(u, a.wq_a, qr_v, a.wkv, kv_v, true);
  ops_->rms_norm(qr_v, a.q_norm.data(), c.norm_eps, qr_v);
  ops_->linear(qr_v, a.wq_b, q_v, true);
  ops_->rms_norm(kv_v, a.kv_norm.data(), c.norm_eps, kv_v);
}

void Model::rope_qkv(int layer, const ForwardContext& ctx, QkvRows& r) const {
  const ModelConfig& c = config_;
  const int64_t H = c.n_heads, D = c.head_dim, rd = c.rope_head_dim;
  const auto& rope = rope_[static_cast<size_t>(layer)];
  RowsView q_v = r.q, kv_v = r.kv;
  ops_->rope(q_v, static_cast<int>(H), static_cast<int>(D), static_cast<int>(D - rd),
             ctx.positions.data(), rope, false);
  // The window K=V: normed, rotated, then FP8 fake-quantized over all dims (QAT).
  ops_->rope(kv_v, 1, static_cast<int>(D), static_cast<int>(D - rd), ctx.positions.data(), rope,
             false);
  ops_->fake_quant_fp8(kv_v, 32);
}

Buffer Model::store_fresh(ConstRowsView kv) const {
  Buffer fresh(*ops_, kv.rows, backend::kv_row_stride(backend::KvFormat::kFp8, kv.cols) / 4);
  ops_->write_kv(kv, backend::KvFormat::kFp8, nullptr, reinterpret_cast<uint8_t*>(fresh.data()));
  return fresh;
}

void Model::attend(int layer,
                   const ForwardContext& ctx,
                   ConstRowsView q,
                   const KeyLists& keys,
                   const Buffer& fresh,
                   RowsView o) const {
  const ModelConfig& c = config_;
  const int64_t H = c.n_heads, D = c.head_dim;
  const int64_t T = q.rows;
  backend::KvAttentionArgs args;
  args.q = q.data;
  args.num_queries = T;
  args.num_heads = static_cast<int>(H);
  args.head_dim = static_cast<int>(D);
  args.window_pool = ctx.pool->window_pool();
  args.window_pool_rows = ctx.pool->window_pool_rows();
  args.fresh = reinterpret_cast<const uint8_t*>(fresh.data());
  // The window lists are host-built (positions and ring slots only): one upload.
  Buffer window_index(*ops_, T, std::max(keys.num_window, 1));
  ops_->upload(reinterpret_cast<const float*>(keys.window.data()), window_index.data(),
               T * keys.num_window);
  args.window_index = reinterpret_cast<const int32_t*>(window_index.data());
  args.num_window = keys.num_window;
  if (keys.stream >= 0) {
    args.compressed_pool = ctx.pool->compressed_kv_pool(keys.stream);
    args.compressed_pool_rows = ctx.pool->compressed_kv_pool_rows(keys.stream);
  }
  args.distinct_rows = keys.distinct_rows;
  args.compressed_index = keys.compressed;
  args.num_compressed = keys.num_compressed;
  args.sink = weights_.layers[static_cast<size_t>(layer)].attn.attn_sink.data();
  args.softmax_scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  args.out = o.data;
  ops_->kv_attention(args);
}

void Model::attention(
    int layer, ForwardContext& ctx, ConstRowsView u, QkvRows& qkv, RowsView o_v) const {
  const ModelConfig& c = config_;
  const int64_t T = u.rows, H = c.n_heads, D = c.head_dim, rd = c.rope_head_dim;
  const int64_t win = c.window_size;
  const int late = c.late_layer_start();
  const auto& rope = rope_[static_cast<size_t>(layer)];

  const int ratio = c.compress_ratios[layer];
  // The compressor beside RoPE and the indexer's queries (index_select joins before it scores the
  // keys the compressor writes; the key lists below read its entries).
  const bool side = ratio > 0 && c.is_kv_source(layer) && open_side_line(ctx);
  if (side) {
    compress(layer, ctx, u);
    ops_->end_side();
  }
  rope_qkv(layer, ctx, qkv);
  RowsView qr_v = qkv.qr, kv_v = qkv.kv;
  ConstRowsView q = qkv.q;

  int stream = -1;
  const RowLists* selection = nullptr;
  if (ratio > 0) {
    if (c.is_kv_source(layer) && !side) compress(layer, ctx, u);
    if (c.is_index_source(layer)) index_select(layer, ctx, u, qr_v);
    if (side) ops_->join_side();
    stream = ctx.pool->stream_of_layer(c.kv_source_of(layer));
    selection = &ctx.selections.at(c.index_source_of(layer));
  }

  // Key lists: `win` window slots aligned to positions t-win+1 .. t (empty slots -1), then the
  // selected compressed entries in ascending order, then -1 padding. The layout depends only on
  // the query's own position and selection, never on the batch. Positions of the query's own
  // chunk are read from this call's rows (`fresh`), older ones from the ring. The compressed
  // half maps the selection (backend memory) through each sequence's page table on the backend.
  const Buffer fresh = store_fresh(kv_v);
  const int64_t pool_rows = ctx.pool->window_pool_rows();
  KeyLists keys;
  keys.num_window = static_cast<int>(win);
  keys.num_compressed = selection ? selection->width : 0;
  keys.stream = stream;
  keys.window.assign(static_cast<size_t>(T * win), -1);
  for (int64_t r = 0; r < T; ++r) {
    const int chunk = ctx.row_chunk[static_cast<size_t>(r)];
    SequenceState& seq = *ctx.chunks[static_cast<size_t>(chunk)].seq;
    const int64_t chunk_start = ctx.chunk_first_position[static_cast<size_t>(chunk)],
                  row0 = ctx.chunk_row_begin[static_cast<size_t>(chunk)];
    const int64_t pos = ctx.positions[static_cast<size_t>(r)];
    int32_t* kr = keys.window.data() + r * win;
    const int64_t valid_from = layer >= late ? seq.late_valid_from : 0;
    for (int64_t i = 0; i < win; ++i) {
      const int64_t kp = pos - win + 1 + i;
      if (kp < 0 || kp < valid_from) continue;
      kr[i] = kp >= chunk_start ? static_cast<int32_t>(pool_rows + row0 + kp - chunk_start)
                                : ctx.pool->window_row_index(seq, layer, kp);
    }
  }
  RowLists compressed;
  if (keys.num_compressed > 0) {
    const RowPageTables tables = row_page_tables(ctx, stream);
    compressed = RowLists(*ops_, T, keys.num_compressed);
    backend::PagedRowsArgs pr;
    pr.entries = selection->row(0);
    pr.num_rows = T;
    pr.width = keys.num_compressed;
    pr.pages = tables.pages.data();
    pr.num_pages = static_cast<int64_t>(tables.pages.size());
    pr.page_offset = tables.offset.data();
    pr.entries_per_page = ctx.pool->entries_per_page();
    pr.out = compressed.row(0);
    ops_->paged_rows(pr);
    keys.compressed = compressed.row(0);
  }
  // A bound on the distinct rows the lists name, per chunk: its window covers its positions and
  // the win - 1 before them; its selections come from the entries its last row sees.
  for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
    const int64_t n = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
    keys.distinct_rows += std::min(n * win, n + win - 1);
    if (keys.num_compressed > 0) {
      const int64_t last = ctx.chunk_first_position[ch] + n - 1;
      keys.distinct_rows += std::min(n * keys.num_compressed, (last + 1) / ratio);
    }
  }
  attend(layer, ctx, q, keys, fresh, o_v);

  // The newest `win` positions of each chunk enter the ring after everyone has read the old ones.
  std::vector<int32_t> ring(static_cast<size_t>(T), -1);
  for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
    const SequenceState& seq = *ctx.chunks[ch].seq;
    const int64_t n = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
    for (int64_t i = std::max<int64_t>(0, n - win); i < n; ++i) {
      ring[static_cast<size_t>(ctx.chunk_row_begin[ch] + i)] =
          ctx.pool->window_row_index(seq, layer, ctx.chunk_first_position[ch] + i);
    }
  }
  ops_->write_kv(kv_v, backend::KvFormat::kFp8, ring.data(), ctx.pool->window_pool());

  ops_->rope(o_v, static_cast<int>(H), static_cast<int>(D), static_cast<int>(D - rd),
             ctx.positions.data(), rope, true);
}

}  // namespace di::model
