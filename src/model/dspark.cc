// The DSpark draft head (spec §1.7; reference DSparkBlock, DSparkAttention, forward_spec): each
// forward seeds every draft layer's window with keys made from the target's hidden states; a
// draft runs a block of [token, noise x (block-1)] through the draft layers, attending the window
// (in slot order) and the whole block bidirectionally, then drafts greedily with a Markov bias.
#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "tensor/numeric.h"

namespace di::model {

void Model::seed_dspark(ForwardContext& ctx) const {
  const ModelConfig& c = config_;
  const int64_t T = ctx.num_rows, dim = c.dim, D = c.head_dim, win = c.window_size;
  Buffer main_x(*ops_, T, dim), kv(*ops_, T, D);
  RowsView mx = main_x.view(), kv_v = kv.view();
  ops_->linear(ctx.main_hidden.view(), weights_.dspark.main_proj, mx, true);
  ops_->rms_norm(mx, weights_.dspark.main_norm.data(), c.norm_eps, mx);
  for (int layer = c.n_layers; layer < c.num_total_layers(); ++layer) {
    const AttentionWeights& a = weights_.layers[static_cast<size_t>(layer)].attn;
    ops_->linear(mx, a.wkv, kv_v, true);
    ops_->rms_norm(kv_v, a.kv_norm.data(), c.norm_eps, kv_v);
    ops_->rope(kv_v, 1, static_cast<int>(D), static_cast<int>(D - c.rope_head_dim),
               ctx.positions.data(), rope_[static_cast<size_t>(layer)], false);
    ops_->fake_quant_fp8(kv_v, 32);
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
  }
}

void Model::dspark_attention(int layer, ForwardContext& ctx, ConstRowsView u, RowsView out) const {
  const ModelConfig& c = config_;
  const int64_t T = u.rows, H = c.n_heads, D = c.head_dim, rd = c.rope_head_dim;
  const auto& rope = rope_[static_cast<size_t>(layer)];
  SequenceState& seq = *ctx.chunks[0].seq;

  Buffer qr(*ops_, T, c.q_lora_rank), q(*ops_, T, H * D), kv(*ops_, T, D);
  QkvRows qkv{qr.view(), q.view(), kv.view()};
  project_qkv_linear(layer, u, qkv);
  rope_qkv(layer, ctx, qkv);
  RowsView kv_v = kv.view();

  // Ring slots 0 .. min(window, filled) - 1 in slot order, then the whole block (fresh rows).
  const int64_t ring = std::min<int64_t>(c.window_size, seq.num_tokens);
  const int64_t n_keys = ring + T;
  const Buffer fresh = store_fresh(kv_v);
  const int64_t pool_rows = ctx.pool->window_pool_rows();
  KeyLists keys;
  keys.num_window = static_cast<int>(n_keys);
  keys.window.resize(static_cast<size_t>(T * n_keys));
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t s = 0; s < ring; ++s)
      keys.window[static_cast<size_t>(r * n_keys + s)] = ctx.pool->window_row_index(seq, layer, s);
    for (int64_t b = 0; b < T; ++b)
      keys.window[static_cast<size_t>(r * n_keys + ring + b)] = static_cast<int32_t>(pool_rows + b);
  }
  Buffer o(*ops_, T, H * D);
  RowsView o_v = o.view();
  attend(layer, ctx, q.view(), keys, fresh, o_v);
  ops_->rope(o_v, static_cast<int>(H), static_cast<int>(D), static_cast<int>(D - rd),
             ctx.positions.data(), rope, true);
  output_projection(layer, o_v, out);
}

Expected<DraftResult> Model::draft(StatePool& pool,
                                   SequenceState& seq,
                                   int32_t token,
                                   std::span<const int32_t> markov_tokens) const {
  const ModelConfig& c = config_;
  if (!c.has_dspark()) return unimplemented("draft: this model has no DSpark layers");
  if (seq.num_tokens == 0) return invalid_argument("draft: the sequence has no context yet");
  if (token < 0 || token >= c.vocab_size) return invalid_argument("draft: token out of range");
  if (!markov_tokens.empty() && static_cast<int>(markov_tokens.size()) != c.dspark_block_size - 1) {
    return invalid_argument("draft: markov_tokens needs block_size - 1 ids");
  }
  for (int32_t t : markov_tokens) {
    if (t < 0 || t >= c.vocab_size) return invalid_argument("draft: markov token out of range");
  }
  const int64_t B = c.dspark_block_size, dim = c.dim, V = c.vocab_size, hc = c.hc_mult;
  ForwardContext ctx;
  ctx.pool = &pool;
  ctx.chunks.push_back({&seq, {}});
  ctx.chunks[0].tokens.assign(static_cast<size_t>(B), c.dspark_noise_token_id);
  ctx.chunks[0].tokens[0] = token;
  ctx.tokens = ctx.chunks[0].tokens;
  ctx.num_rows = B;
  ctx.chunk_row_begin = {0};
  ctx.chunk_first_position = {seq.num_tokens};
  ctx.row_chunk.assign(static_cast<size_t>(B), 0);
  for (int64_t i = 0; i < B; ++i) ctx.positions.push_back(seq.num_tokens + i);

  Buffer x(*ops_, B, hc * dim);
  RowsView xv = x.view();
  embed(ctx, xv);
  Buffer pre_mix = initial_pre_mix(B);
  for (int layer = c.n_layers; layer < c.num_total_layers(); ++layer)
    run_block(layer, ctx, xv, pre_mix.view());

  Buffer h_d(*ops_, B, dim), hn(*ops_, B, dim), logits(*ops_, B, V);
  ops_->hc_collapse(xv, pre_mix.data(), static_cast<int>(hc), h_d.view());
  ops_->rms_norm(h_d.view(), weights_.dspark.norm.data(), c.norm_eps, hn.view());
  DraftResult result;
  ops_->linear(hn.view(), weights_.head, logits.view(), false);
  result.logits = logits.to_host();
  const std::vector<float> h = h_d.to_host();
  // The Markov and confidence heads run one row at a time on host-built inputs.
  Buffer embed_d(*ops_, 1, c.dspark_markov_rank), bias_d(*ops_, 1, V),
      conf_d(*ops_, 1, dim + c.dspark_markov_rank), conf_out(*ops_, 1, 1);

  const int64_t rank = c.dspark_markov_rank;
  const uint16_t* markov = reinterpret_cast<const uint16_t*>(weights_.dspark.markov_embed.data);
  std::vector<float> embed_row(static_cast<size_t>(rank)), bias(static_cast<size_t>(V));
  std::vector<float> conf_in(static_cast<size_t>(dim + rank));
  result.tokens.push_back(token);
  for (int64_t i = 0; i < B; ++i) {
    const int32_t prev = (i > 0 && !markov_tokens.empty())
                             ? markov_tokens[static_cast<size_t>(i - 1)]
                             : result.tokens.back();
    for (int64_t d = 0; d < rank; ++d)
      embed_row[static_cast<size_t>(d)] = bf16_to_float(markov[prev * rank + d]);
    embed_d.from_host(embed_row);
    ops_->linear(embed_d.view(), weights_.dspark.markov_head, bias_d.view(), false);
    bias = bias_d.to_host();
    float* row = result.logits.data() + i * V;
    for (int64_t v = 0; v < V; ++v) row[v] += bias[static_cast<size_t>(v)];
    result.tokens.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
    std::copy_n(h.begin() + i * dim, dim, conf_in.begin());
    std::copy(embed_row.begin(), embed_row.end(), conf_in.begin() + dim);
    conf_d.from_host(conf_in);
    ops_->linear(conf_d.view(), weights_.dspark.confidence_proj, conf_out.view(), false);
    result.confidence.push_back(conf_out.to_host()[0]);
  }
  return result;
}

}  // namespace di::model
