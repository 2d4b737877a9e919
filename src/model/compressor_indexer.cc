// The compressed half of V4.1 attention (spec §1.3 step 4; reference Compressor, Indexer,
// select_candidate_blocks): KV sources pool `ratio` tokens into one latent (softmax-gated at
// ratio > 1, carrying a partial group across calls), derive FP4 index keys and FP4 compressed KV
// from it; index sources score their queries against the index keys and keep the top-k visible
// entries, inside the candidate blocks when a candidate source precedes them.
#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "tensor/numeric.h"

namespace di::model {

void Model::compress(int layer, ForwardContext& ctx, ConstRowsView u) const {
  const AttentionWeights& a = weights_.layers[static_cast<size_t>(layer)].attn;
  const ModelConfig& c = config_;
  const int ratio = c.compress_ratios[layer];
  const int stream = ctx.pool->stream_of_layer(layer);
  const int64_t T = u.rows, D = c.head_dim, rd = c.rope_head_dim, Di = c.index_head_dim;

  // New latents (bf16, before the norm) with the sequence and entry index they belong to.
  Buffer lat_buffer;
  std::vector<std::pair<int, int64_t>> owner;  // (chunk, entry)
  if (ratio == 1) {
    lat_buffer = Buffer(*ops_, T, D);
    ops_->linear(u, a.comp_wkv, lat_buffer.view(), true);
    for (int64_t r = 0; r < T; ++r)
      owner.emplace_back(ctx.row_chunk[static_cast<size_t>(r)],
                         ctx.positions[static_cast<size_t>(r)]);
  } else {
    // fp32 projections (the reference promotes these weights and x to fp32). A group of `ratio`
    // positions is pooled where its rows lie: in this call's projections when the chunk holds
    // all of it, else in the sequence's carry rows (state pool, backend memory), which take a
    // chunk's leading rows that finish a group begun earlier and its trailing rows that begin
    // one. Every chunk's rows move in three calls, in this order because a chunk that finishes
    // a carried group may begin the next one in the same carry rows: leading rows into the
    // carry, all pools, trailing rows into the carry (a call per chunk was 3-4 launches per
    // sequence per step).
    Buffer kv_d(*ops_, T, D), score_d(*ops_, T, D);
    ops_->linear(u, a.comp_wkv, kv_d.view(), false);
    ops_->linear(u, a.comp_wgate, score_d.view(), false);
    struct RowMoves {
      std::vector<const float*> src;
      std::vector<float*> dst;
      void add(const float* s, float* d) {
        src.push_back(s);
        dst.push_back(d);
      }
    } leading, trailing;
    std::vector<const float*> pool_kv, pool_score;
    for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
      const SequenceState& seq = *ctx.chunks[ch].seq;
      const int64_t p0 = ctx.chunk_first_position[ch], row0 = ctx.chunk_row_begin[ch];
      const int64_t n_rows = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
      float* carry_kv = ctx.pool->carry_kv_rows(seq, stream);
      float* carry_score = ctx.pool->carry_score_rows(seq, stream);
      auto pool_group = [&](const float* kv_rows, const float* score_rows, int64_t last_pos) {
        pool_kv.push_back(kv_rows);
        pool_score.push_back(score_rows);
        owner.emplace_back(static_cast<int>(ch), last_pos / ratio);
      };
      int64_t i = 0;
      if (p0 % ratio != 0) {  // finish the group an earlier call began
        const int64_t s0 = p0 % ratio, take = std::min<int64_t>(n_rows, ratio - s0);
        for (int64_t j = 0; j < take; ++j) {
          leading.add(kv_d.row(row0 + j), carry_kv + (s0 + j) * D);
          leading.add(score_d.row(row0 + j), carry_score + (s0 + j) * D);
        }
        i = take;
        if (s0 + take == ratio) pool_group(carry_kv, carry_score, p0 + take - 1);
      }
      for (; i + ratio <= n_rows; i += ratio) {
        pool_group(kv_d.row(row0 + i), score_d.row(row0 + i), p0 + i + ratio - 1);
      }
      for (int64_t j = i; j < n_rows;
           ++j) {  // begin the next group (p0 + i is a multiple of ratio)
        trailing.add(kv_d.row(row0 + j), carry_kv + (j - i) * D);
        trailing.add(score_d.row(row0 + j), carry_score + (j - i) * D);
      }
    }
    const int64_t groups = static_cast<int64_t>(pool_kv.size());
    Buffer pooled(*ops_, groups, D);
    ops_->copy_rows(leading.src.data(), leading.dst.data(),
                    static_cast<int64_t>(leading.src.size()), D);
    if (groups > 0)
      ops_->softmax_pool(pool_kv.data(), pool_score.data(), groups, ratio, D, pooled.data());
    ops_->copy_rows(trailing.src.data(), trailing.dst.data(),
                    static_cast<int64_t>(trailing.src.size()), D);
    if (groups > 0) {
      ops_->scale_round_bf16(pooled.view(), 1.0f);  // the latent is bf16
      lat_buffer = std::move(pooled);
    }
  }
  const int64_t n = static_cast<int64_t>(owner.size());
  if (n == 0) return;
  RowsView lat = lat_buffer.view();
  ops_->rms_norm(lat, a.comp_norm.data(), c.norm_eps, lat);
  std::vector<int64_t> rope_pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    rope_pos[static_cast<size_t>(i)] = owner[static_cast<size_t>(i)].second * ratio;
  const auto& rope = rope_[static_cast<size_t>(layer)];

  // Index keys from the latent before its RoPE.
  Buffer keys(*ops_, n, Di);
  RowsView k_v = keys.view();
  ops_->linear(lat, a.idx_wk, k_v, true);
  ops_->rms_norm(k_v, a.idx_k_norm.data(), c.norm_eps, k_v);
  ops_->rope(k_v, 1, static_cast<int>(Di), static_cast<int>(Di - rd), rope_pos.data(), rope, false);
  ops_->fake_quant_fp4(k_v, backend::Fp4ScaleKind::kUe8m0Block32);

  ops_->rope(lat, 1, static_cast<int>(D), static_cast<int>(D - rd), rope_pos.data(), rope, false);

  // The compressed KV is stored in FP4: writing it is its fake quantization (kE4m3Block16).
  std::vector<int32_t> slots(static_cast<size_t>(n));
  std::vector<const float*> key_src(static_cast<size_t>(n));
  std::vector<float*> key_dst(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto [ch, entry] = owner[static_cast<size_t>(i)];
    SequenceState& seq = *ctx.chunks[static_cast<size_t>(ch)].seq;
    slots[static_cast<size_t>(i)] = ctx.pool->compressed_kv_row_index(seq, stream, entry);
    key_src[static_cast<size_t>(i)] = k_v.row(i);
    key_dst[static_cast<size_t>(i)] = ctx.pool->index_key_row(seq, stream, entry);
    seq.streams[static_cast<size_t>(stream)].num_entries = entry + 1;
  }
  ops_->copy_rows(key_src.data(), key_dst.data(), n, Di);
  ops_->write_kv(lat, backend::KvFormat::kFp4, slots.data(), ctx.pool->compressed_kv_pool(stream));
}

void Model::index_select(int layer, ForwardContext& ctx, ConstRowsView u, ConstRowsView qr) const {
  const AttentionWeights& a = weights_.layers[static_cast<size_t>(layer)].attn;
  const ModelConfig& c = config_;
  const int ratio = c.compress_ratios[layer];
  const int64_t T = u.rows, Hi = c.index_n_heads, Di = c.index_head_dim, rd = c.rope_head_dim;
  const int stream = ctx.pool->stream_of_layer(c.kv_source_of(layer));

  Buffer q(*ops_, T, Hi * Di), w_d(*ops_, T, Hi);
  RowsView q_v = q.view();
  ops_->linear(qr, a.idx_wq_b, q_v, true);
  ops_->rope(q_v, static_cast<int>(Hi), static_cast<int>(Di), static_cast<int>(Di - rd),
             ctx.positions.data(), rope_[static_cast<size_t>(layer)], false);
  ops_->fake_quant_fp4(q_v, backend::Fp4ScaleKind::kUe8m0Block32);
  ops_->linear(u, a.idx_weights_proj, w_d.view(), true);
  const float head_scale = static_cast<float>(std::pow(static_cast<double>(Di), -0.5) *
                                              std::pow(static_cast<double>(Hi), -0.5));
  ops_->scale_round_bf16(w_d.view(), head_scale);

  // The queries are ready; the scores read the keys a side line's compressor writes (attention).
  ops_->join_side();

  const bool is_candidate_source = layer == c.candidate_source_layer;
  const bool uses_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < layer;
  // Every row keeps min(topk, visible) entries (and min(topk_blocks, its blocks) candidate
  // blocks): the lists' widths are known here, before any score exists.
  std::vector<int64_t> visible(static_cast<size_t>(T));
  int width = 0, block_width = 0;
  for (int64_t r = 0; r < T; ++r) {
    const int64_t vis = (ctx.positions[static_cast<size_t>(r)] + 1) / ratio;
    visible[static_cast<size_t>(r)] = vis;
    width = std::max<int>(width, static_cast<int>(std::min<int64_t>(c.index_topk, vis)));
    if (is_candidate_source) {
      const int64_t blocks = (vis + c.candidate_block_size - 1) / c.candidate_block_size;
      block_width = std::max<int>(
          block_width, static_cast<int>(std::min<int64_t>(c.candidate_topk_blocks, blocks)));
    }
  }
  RowLists& selection = ctx.selections[layer];
  selection = RowLists(*ops_, T, width);
  if (is_candidate_source) ctx.candidate_blocks = RowLists(*ops_, T, block_width);
  // One call for every row: each row reads its sequence's keys through its page table, and the
  // score rows are as wide as the longest sequence's entries (-inf past a row's visible ones).
  const RowPageTables tables = row_page_tables(ctx, stream);
  const int64_t n_keys = tables.max_entries;
  Buffer scores(*ops_, T, n_keys);
  if (n_keys > 0) {
    backend::IndexScoreArgs args;
    args.q = q.data();
    args.weights = w_d.data();
    args.num_queries = T;
    args.num_heads = static_cast<int>(Hi);
    args.head_dim = static_cast<int>(Di);
    args.key_pool = ctx.pool->index_key_pool(stream);
    args.pages = tables.pages.data();
    args.num_pages = static_cast<int64_t>(tables.pages.size());
    args.page_offset = tables.offset.data();
    args.entries_per_page = ctx.pool->entries_per_page();
    args.num_keys = n_keys;
    args.num_visible = visible.data();
    args.scores = scores.data();
    ops_->index_scores(args);
  }
  if (is_candidate_source) {
    backend::CandidateBlockArgs cb;
    cb.scores = scores.data();
    cb.num_queries = T;
    cb.num_keys = n_keys;
    cb.num_visible = visible.data();
    cb.block_size = c.candidate_block_size;
    cb.topk_blocks = c.candidate_topk_blocks;
    cb.blocks = ctx.candidate_blocks.row(0);
    cb.width = block_width;
    ops_->candidate_blocks(cb);
  }
  backend::IndexTopkArgs tk;
  tk.scores = scores.data();
  tk.num_queries = T;
  tk.num_keys = n_keys;
  tk.num_visible = visible.data();
  tk.topk = c.index_topk;
  if (uses_candidates) {
    tk.blocks = ctx.candidate_blocks.row(0);
    tk.num_blocks = ctx.candidate_blocks.width;
    tk.block_size = c.candidate_block_size;
  }
  tk.selected = selection.row(0);
  tk.width = width;
  ops_->index_topk(tk);
  if (ctx.trace) {
    ctx.trace->selections[layer] = selection.to_host();
    if (is_candidate_source) ctx.trace->candidate_blocks[layer] = ctx.candidate_blocks.to_host();
  }
}

}  // namespace di::model
