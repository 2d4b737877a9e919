// The compressed half of V4.1 attention (spec §1.3 step 4; reference Compressor, Indexer,
// select_candidate_blocks): KV sources pool `ratio` tokens into one latent (softmax-gated at
// ratio > 1, carrying a partial group across calls), derive FP4 index keys and FP4 compressed KV
// from it; index sources score their queries against the index keys and keep the top-k visible
// entries, inside the candidate blocks when a candidate source precedes them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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
    // one. Pools are enqueued in row order, each before the carry is written again.
    Buffer kv_d(*ops_, T, D), score_d(*ops_, T, D);
    ops_->linear(u, a.comp_wkv, kv_d.view(), false);
    ops_->linear(u, a.comp_wgate, score_d.view(), false);
    int64_t groups = 0;
    for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
      const int64_t p0 = ctx.chunk_first_position[ch];
      const int64_t n_rows = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
      groups += (p0 + n_rows) / ratio - p0 / ratio;
    }
    Buffer pooled(*ops_, groups, D);
    for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
      const SequenceState& seq = *ctx.chunks[ch].seq;
      const int64_t p0 = ctx.chunk_first_position[ch], row0 = ctx.chunk_row_begin[ch];
      const int64_t n_rows = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
      float* carry_kv = ctx.pool->carry_kv_rows(seq, stream);
      float* carry_score = ctx.pool->carry_score_rows(seq, stream);
      auto pool_group = [&](const float* kv_rows, const float* score_rows, int64_t last_pos) {
        const int64_t g = static_cast<int64_t>(owner.size());
        ops_->softmax_pool(kv_rows, score_rows, ratio, D, pooled.row(g));
        owner.emplace_back(static_cast<int>(ch), last_pos / ratio);
      };
      int64_t i = 0;
      if (p0 % ratio != 0) {  // finish the group an earlier call began
        const int64_t s0 = p0 % ratio, take = std::min<int64_t>(n_rows, ratio - s0);
        ops_->copy_2d(kv_d.row(row0), D, carry_kv + s0 * D, D, D, take);
        ops_->copy_2d(score_d.row(row0), D, carry_score + s0 * D, D, D, take);
        i = take;
        if (s0 + take == ratio) pool_group(carry_kv, carry_score, p0 + take - 1);
      }
      for (; i + ratio <= n_rows; i += ratio) {
        pool_group(kv_d.row(row0 + i), score_d.row(row0 + i), p0 + i + ratio - 1);
      }
      if (i < n_rows) {  // begin the next group (p0 + i is a multiple of ratio here)
        ops_->copy_2d(kv_d.row(row0 + i), D, carry_kv, D, D, n_rows - i);
        ops_->copy_2d(score_d.row(row0 + i), D, carry_score, D, D, n_rows - i);
      }
    }
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
  for (int64_t i = 0; i < n; ++i) {
    auto [ch, entry] = owner[static_cast<size_t>(i)];
    SequenceState& seq = *ctx.chunks[static_cast<size_t>(ch)].seq;
    slots[static_cast<size_t>(i)] = ctx.pool->compressed_kv_row_index(seq, stream, entry);
    ops_->copy(k_v.row(i), ctx.pool->index_key_row(seq, stream, entry), Di);
    seq.streams[static_cast<size_t>(stream)].num_entries = entry + 1;
  }
  ops_->write_kv(lat, backend::KvFormat::kFp4, slots.data(), ctx.pool->compressed_kv_pool(stream));
}

namespace {

// Blocks of `block_size` entries ranked by their best score; the block holding the newest visible
// entry is pinned first; keep up to `topk_blocks` blocks with a finite score (ties: lower block).
std::vector<int32_t> candidate_blocks(const float* scores,
                                      int64_t visible,
                                      int block_size,
                                      int topk_blocks) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t nb = (visible + block_size - 1) / block_size;
  std::vector<float> bs(static_cast<size_t>(nb), -inf);
  for (int64_t s = 0; s < visible; ++s)
    bs[static_cast<size_t>(s / block_size)] =
        std::max(bs[static_cast<size_t>(s / block_size)], scores[s]);
  if (visible > 0) bs[static_cast<size_t>((visible - 1) / block_size)] = inf;
  std::vector<int32_t> order(static_cast<size_t>(nb));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return bs[static_cast<size_t>(x)] > bs[static_cast<size_t>(y)];
  });
  std::vector<int32_t> keep;
  for (int32_t b : order) {
    if (static_cast<int>(keep.size()) == topk_blocks || bs[static_cast<size_t>(b)] == -inf) break;
    keep.push_back(b);
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

// The top-k visible entries by score (ties and -inf: lower index first), in ascending order.
std::vector<int32_t> select_topk(const float* scores, int64_t visible, int topk) {
  std::vector<int32_t> order(static_cast<size_t>(visible));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min<int64_t>(topk, visible);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t x, int32_t y) {
    return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
  });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

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

  const bool is_candidate_source = layer == c.candidate_source_layer;
  const bool uses_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < layer;
  auto& selection = ctx.selections[layer];
  selection.assign(static_cast<size_t>(T), {});
  for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
    SequenceState& seq = *ctx.chunks[ch].seq;
    const int64_t n_entries = seq.streams[static_cast<size_t>(stream)].num_entries;
    const int64_t row0 = ctx.chunk_row_begin[ch];
    const int64_t rows = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
    std::vector<const float*> keys(static_cast<size_t>(n_entries));
    for (int64_t e = 0; e < n_entries; ++e)
      keys[static_cast<size_t>(e)] = ctx.pool->index_key_row(seq, stream, e);
    std::vector<int64_t> visible(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i)
      visible[static_cast<size_t>(i)] = (ctx.positions[static_cast<size_t>(row0 + i)] + 1) / ratio;
    Buffer scores_d(*ops_, rows, n_entries);
    backend::IndexScoreArgs args;
    args.q = q.data() + row0 * Hi * Di;
    args.weights = w_d.data() + row0 * Hi;
    args.num_queries = rows;
    args.num_heads = static_cast<int>(Hi);
    args.head_dim = static_cast<int>(Di);
    args.keys = keys.data();
    args.num_keys = n_entries;
    args.num_visible = visible.data();
    args.scores = scores_d.data();
    if (n_entries > 0) ops_->index_scores(args);
    std::vector<float> scores = scores_d.to_host();
    for (int64_t i = 0; i < rows; ++i) {
      float* s = scores.data() + i * n_entries;
      const int64_t vis = visible[static_cast<size_t>(i)];
      const size_t row = static_cast<size_t>(row0 + i);
      if (is_candidate_source) {
        ctx.candidate_blocks[row] =
            candidate_blocks(s, vis, c.candidate_block_size, c.candidate_topk_blocks);
      } else if (uses_candidates) {
        const auto& blocks = ctx.candidate_blocks[row];
        for (int64_t e = 0; e < vis; ++e) {
          if (!std::binary_search(blocks.begin(), blocks.end(),
                                  static_cast<int32_t>(e / c.candidate_block_size))) {
            s[e] = -std::numeric_limits<float>::infinity();
          }
        }
      }
      selection[row] = select_topk(s, vis, c.index_topk);
    }
  }
  if (ctx.trace) {
    ctx.trace->selections[layer] = selection;
    if (is_candidate_source) ctx.trace->candidate_blocks[layer] = ctx.candidate_blocks;
  }
}

}  // namespace di::model
