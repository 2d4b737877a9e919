// One block of the backbone or the DSpark head (attention site + FFN site), its per-row
// workspace, and the segments a device backend replays as graphs (Ops::begin_segment).
#include <xxhash.h>

#include <initializer_list>
#include <iterator>
#include <vector>

#include "model/model.h"

namespace di::model {

bool Model::in_workspace(const float* p) const {
  const float* base = workspace_.data();
  return base && p >= base && p < base + workspace_.size();
}

namespace {

// A segment's key (Ops::begin_segment): its kind, layer and row count and the backend buffers it
// reads and writes; every other launch parameter follows from these and the weights.
uint64_t segment_key(std::initializer_list<uint64_t> parts) {
  const std::vector<uint64_t> v(parts);
  return XXH3_64bits(v.data(), v.size() * sizeof(uint64_t));
}
uint64_t ptr(const void* p) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

}  // namespace

Model::BlockRows Model::block_rows(int64_t rows, bool stream) const {
  const ModelConfig& c = config_;
  const int64_t hc = c.hc_mult, dim = c.dim;
  const int64_t widths[] = {
      hc * dim,  hc, kCoefficientFloats,     kCoefficientFloats, dim,
      dim,       hc, c.n_heads * c.head_dim, c.q_lora_rank,      c.n_heads * c.head_dim,
      c.head_dim};
  BlockRows b;
  std::vector<RowsView> views;
  if (rows > kWorkspaceRows) {
    // Only the caller's own rows: x and pre_mix for forward, the rest for a block.
    for (size_t i = 0; i < std::size(widths); ++i) {
      if ((i < 2) != stream) {
        views.push_back(RowsView{});
        continue;
      }
      b.owned.emplace_back(*ops_, rows, widths[i]);
      views.push_back(b.owned.back().view());
    }
  } else {
    // Grown in powers of two: a new allocation moves every view (and so every segment key).
    auto slot = [](int64_t n) { return (n + 63) / 64 * 64; };  // 256-byte aligned slots
    if (rows > workspace_rows_) {
      int64_t cap = 16;
      while (cap < rows) cap *= 2;
      int64_t total = 0;
      for (int64_t w : widths) total += slot(cap * w);
      workspace_ = Buffer(*ops_, 1, total);
      workspace_rows_ = cap;
    }
    float* p = workspace_.data();
    for (int64_t w : widths) {
      views.push_back(RowsView{p, rows, w});
      p += slot(workspace_rows_ * w);
    }
  }
  b.x = views[0];
  b.pre_mix = views[1];
  b.attn_c = views[2];
  b.ffn_c = views[3];
  b.u = views[4];
  b.y = views[5];
  b.attn_pre = views[6];
  b.o = views[7];
  b.qkv = QkvRows{views[8], views[9], views[10]};
  return b;
}

void Model::run_block(int layer, ForwardContext& ctx, RowsView x, RowsView pre_mix) const {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int hc = config_.hc_mult;
  const int64_t T = ctx.num_rows;
  const bool backbone = layer < config_.n_layers;
  // The block's own rows (not x or pre_mix, which forward may also hold in the workspace).
  BlockRows b = block_rows(T, /*stream=*/false);
  // The runs of ops between the attention's host-fed ops (positions, key lists, ring slots) are
  // segments: a device backend replays them as graphs (a traced forward reads the router's
  // choices back, so it runs everything eagerly).
  // Only rows that live in the workspace keep their addresses from step to step (a prefill
  // chunk past kWorkspaceRows, bounded replay's narrowed rows or a draft's would be new keys every
  // time, and fill the backend's table).
  const bool segments =
      !ctx.trace && T <= kWorkspaceRows && in_workspace(x.data) && in_workspace(pre_mix.data);
  const uint64_t base = segment_key({instance_id_, static_cast<uint64_t>(layer),
                                     static_cast<uint64_t>(T), ptr(x.data), ptr(pre_mix.data),
                                     ptr(b.attn_c.data), ptr(b.qkv.qr.data), ptr(b.o.data)});

  // attention site: mixes from the stream, collapse with the previous site's pre, the norm and
  // the products of q and kv
  if (!segments || ops_->begin_segment(segment_key({base, 1}))) {
    ops_->hc_mixes(x, w.hc_attn.fn.data(), w.hc_attn.scale.data(), w.hc_attn.base.data(), hc,
                   config_.hc_sinkhorn_iters, config_.hc_eps, config_.norm_eps,
                   coefficients(b.attn_c));
    ops_->hc_collapse(x, pre_mix.data, hc, b.u);
    ops_->rms_norm(b.u, w.attn_norm.data(), config_.norm_eps, b.u);
    if (backbone) project_qkv_linear(layer, b.u, b.qkv);
    if (segments) ops_->end_segment();
  }
  if (backbone) {
    attention(layer, ctx, b.u, b.qkv, b.o);
  } else {
    dspark_attention(layer, ctx, b.u, b.y);
  }

  if (!segments || ops_->begin_segment(segment_key({base, 2}))) {
    if (backbone) output_projection(layer, b.o, b.y);
    ops_->hc_expand(b.y, x, coefficients(b.attn_c), hc, x);  // in place (Ops::hc_expand)

    // FFN site: collapse with the attention site's pre (the first member of each row's
    // coefficients)
    ops_->copy_2d(b.attn_c.data, kCoefficientFloats, b.attn_pre.data, hc, hc, T);
    ops_->hc_mixes(x, w.hc_ffn.fn.data(), w.hc_ffn.scale.data(), w.hc_ffn.base.data(), hc,
                   config_.hc_sinkhorn_iters, config_.hc_eps, config_.norm_eps,
                   coefficients(b.ffn_c));
    ops_->hc_collapse(x, b.attn_pre.data, hc, b.u);
    ops_->rms_norm(b.u, w.ffn_norm.data(), config_.norm_eps, b.u);
    moe(layer, &ctx, b.u, b.y);
    ops_->hc_expand(b.y, x, coefficients(b.ffn_c), hc, x);
    // This block's FFN pre, in place: the attention site above was its last reader.
    ops_->copy_2d(b.ffn_c.data, kCoefficientFloats, pre_mix.data, hc, hc, T);
    if (segments) ops_->end_segment();
  }
}

}  // namespace di::model
