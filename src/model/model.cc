#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "model/engram/multipliers.h"
#include "model/engram/token_map.h"
#include "model/rope_tables.h"
#include "tensor/numeric.h"
#include "util/check.h"

namespace di::model {

Model::~Model() = default;

Expected<std::unique_ptr<Model>> Model::load(const std::string& dir, const backend::Ops& ops) {
  std::unique_ptr<Model> m(new Model());
  DI_ASSIGN_OR_RETURN(m->config_, load_model_config(dir + "/config.json"));
  DI_ASSIGN_OR_RETURN(auto ckpt, weights::Checkpoint::open_dir(dir));
  m->checkpoint_ = std::make_unique<weights::Checkpoint>(std::move(ckpt));
  DI_ASSIGN_OR_RETURN(m->weights_, bind_model_weights(m->config_, *m->checkpoint_));
  m->ops_ = &ops;
  std::random_device entropy;
  m->instance_id_ = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  for (int l = 0; l < m->config_.num_total_layers(); ++l) {
    m->rope_.push_back(rope_table_for_layer(m->config_, l));
  }
  if (!m->config_.engram_layer_ids.empty()) DI_RETURN_IF_ERROR(m->init_engram(dir));
  return m;
}

Status Model::init_engram(const std::string& dir) {
  const ModelConfig& c = config_;
  // The reference derives the compressed token map from the checkpoint's tokenizer; every hash
  // multiplier depends on its size, so a mismatch must stop the load.
  DI_ASSIGN_OR_RETURN(engram::CompressedTokenMap map,
                      engram::build_compressed_token_map_from_file(dir + "/tokenizer.json"));
  if (map.num_classes != c.engram_compressed_vocab_size) {
    return invalid_argument(dir + "/tokenizer.json: its compressed Engram vocabulary has " +
                            std::to_string(map.num_classes) +
                            " classes but config.json says engram_compressed_vocab_size = " +
                            std::to_string(c.engram_compressed_vocab_size));
  }
  if (static_cast<int64_t>(map.lookup.size()) < c.vocab_size) {
    map.lookup.resize(static_cast<size_t>(c.vocab_size), map.lookup.empty() ? 0 : map.lookup[0]);
  }
  token_map_ = std::move(map.lookup);
  engram::EngramLayoutConfig lc;
  lc.layer_ids.assign(c.engram_layer_ids.begin(), c.engram_layer_ids.end());
  lc.max_ngram_size = c.engram_max_ngram_size;
  lc.n_heads = c.engram_n_heads;
  lc.vocab_size = c.engram_vocab_size;
  DI_ASSIGN_OR_RETURN(engram::EngramLayout layout, engram::EngramLayout::from_config(lc));
  for (size_t i = 0; i < layout.table_rows.size(); ++i) {
    if (layout.table_rows[i] != c.engram_num_embeddings[i]) {
      return invalid_argument("config: engram_num_embeddings[" + std::to_string(i) +
                              "] = " + std::to_string(c.engram_num_embeddings[i]) +
                              " but the prime layout gives " +
                              std::to_string(layout.table_rows[i]));
    }
  }
  DI_ASSIGN_OR_RETURN(auto multipliers,
                      engram::hash_multipliers_for_layers(lc.layer_ids, lc.max_ngram_size,
                                                          c.engram_compressed_vocab_size));
  const int32_t pad = token_map_[static_cast<size_t>(c.engram_pad_id)];
  DI_ASSIGN_OR_RETURN(engram::NgramHasher hasher,
                      engram::NgramHasher::create(layout, std::move(multipliers), pad));
  engram_layout_ = std::make_unique<engram::EngramLayout>(std::move(layout));
  hasher_ = std::make_unique<engram::NgramHasher>(std::move(hasher));
  return Status();
}

Status Model::begin_forward(ForwardContext& ctx) const {
  DI_RETURN_IF_ERROR(begin_rows(ctx));
  return hash_engram(ctx);
}

Status Model::begin_rows(ForwardContext& ctx) const {
  if (!ctx.pool) return invalid_argument("forward: no state pool");
  {
    // Each sequence once (sorted: a batch of 256 took 32K comparisons pairwise).
    std::vector<const SequenceState*> seqs;
    seqs.reserve(ctx.chunks.size());
    for (const SequenceChunk& ch : ctx.chunks) {
      if (ch.seq) seqs.push_back(ch.seq);  // a missing one is reported below
    }
    std::sort(seqs.begin(), seqs.end());
    if (std::adjacent_find(seqs.begin(), seqs.end()) != seqs.end()) {
      return invalid_argument("forward: a sequence appears twice");
    }
  }
  ctx.tokens.clear();
  ctx.pending_rows.clear();
  ctx.positions.clear();
  ctx.row_chunk.clear();
  ctx.chunk_row_begin.clear();
  ctx.chunk_first_position.clear();
  for (size_t c = 0; c < ctx.chunks.size(); ++c) {
    const SequenceChunk& ch = ctx.chunks[c];
    if (!ch.seq || ch.seq->slot < 0)
      return invalid_argument("forward: chunk without a live sequence");
    if (ch.pending && ch.tokens.size() != 1) {
      return invalid_argument("forward: a chunk with a pending token holds that token alone");
    }
    if (hasher_ && engram::NgramHasher::holds_pending(ch.seq->engram_history)) {
      return invalid_argument(
          "forward: the sequence's previous token is still pending (Model::commit_token)");
    }
    for (int32_t t :
         ch.pending ? std::span<const int32_t>() : std::span<const int32_t>(ch.tokens)) {
      if (t < 0 || t >= config_.vocab_size) {
        return invalid_argument("forward: token id " + std::to_string(t) + " outside [0, " +
                                std::to_string(config_.vocab_size) + ")");
      }
      // Checked here so that hash_engram, after the first layers were issued, cannot fail on it.
      if (hasher_ && static_cast<size_t>(t) >= token_map_.size()) {
        return invalid_argument("forward: token id " + std::to_string(t) +
                                " outside the Engram token map of " +
                                std::to_string(token_map_.size()));
      }
    }
    DI_RETURN_IF_ERROR(ctx.pool->reserve(*ch.seq, static_cast<int64_t>(ch.tokens.size())));
    ctx.chunk_row_begin.push_back(static_cast<int64_t>(ctx.tokens.size()));
    ctx.chunk_first_position.push_back(ch.seq->num_tokens);
    if (ch.pending) ctx.pending_rows.push_back(static_cast<int64_t>(ctx.tokens.size()));
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      ctx.tokens.push_back(ch.pending ? 0 : ch.tokens[i]);
      ctx.positions.push_back(ch.seq->num_tokens + static_cast<int64_t>(i));
      ctx.row_chunk.push_back(static_cast<int32_t>(c));
    }
  }
  ctx.num_rows = static_cast<int64_t>(ctx.tokens.size());
  ctx.selections.clear();
  ctx.candidate_blocks = RowLists();
  if (config_.has_dspark()) {
    const int64_t width =
        static_cast<int64_t>(config_.dspark_target_layer_ids.size()) * config_.dim;
    ctx.main_hidden = Buffer(*ops_, ctx.num_rows, width);
    ops_->fill(ctx.main_hidden.data(), 0.0f, ctx.num_rows * width);
  }
  return Status();
}

Status Model::hash_engram(ForwardContext& ctx) const {
  ctx.engram_hashes.clear();
  ctx.engram_next_history.clear();
  ctx.pending_look_back.clear();
  if (hasher_) {
    const int cols = hasher_->buckets_per_layer();
    const size_t n_layers = config_.engram_layer_ids.size();
    std::vector<int64_t> all(static_cast<size_t>(ctx.num_rows) * n_layers * cols);
    for (size_t c = 0; c < ctx.chunks.size(); ++c) {
      const auto& ch = ctx.chunks[c];
      engram::NgramHistory history = ch.seq->engram_history;  // committed in end_forward
      if (ch.pending) {
        // Hashed on the backend (apply_engram) from the look-back known here; its rows in `all`
        // stay zero.
        const size_t at = ctx.pending_look_back.size();
        ctx.pending_look_back.resize(at + static_cast<size_t>(hasher_->max_ngram_size() - 1));
        DI_RETURN_IF_ERROR(hasher_->look_back_pending(
            history, std::span<int32_t>(ctx.pending_look_back).subspan(at)));
        ctx.engram_next_history.push_back(std::move(history));
        continue;
      }
      std::vector<int32_t> compressed(ch.tokens.size());
      DI_RETURN_IF_ERROR(engram::compress_tokens(token_map_, ch.tokens, compressed));
      DI_RETURN_IF_ERROR(
          hasher_->hash(compressed, history,
                        std::span<int64_t>(all).subspan(
                            static_cast<size_t>(ctx.chunk_row_begin[c]) * n_layers * cols,
                            ch.tokens.size() * n_layers * cols)));
      ctx.engram_next_history.push_back(std::move(history));
    }
    for (size_t l = 0; l < n_layers; ++l) {
      auto& h = ctx.engram_hashes[config_.engram_layer_ids[l]];
      h.resize(static_cast<size_t>(ctx.num_rows) * cols);
      for (int64_t r = 0; r < ctx.num_rows; ++r) {
        std::copy_n(
            all.begin() + (r * static_cast<int64_t>(n_layers) + static_cast<int64_t>(l)) * cols,
            cols, h.begin() + r * cols);
      }
    }
  }
  return Status();
}

bool Model::open_side_line(const ForwardContext& ctx) const {
  return ctx.num_rows <= kSideLineRows && !ctx.trace && ops_->begin_side();
}

void Model::embed(const ForwardContext& ctx, RowsView x) const {
  if (ctx.token_ids.data()) {
    ops_->embed_rows(weights_.embed, token_ids(ctx), config_.hc_mult, x);
    return;
  }
  // A context built without begin_rows (the draft head's): host tokens only.
  const Buffer ids = upload_token_ids(ctx);
  ops_->embed_rows(weights_.embed, reinterpret_cast<const int32_t*>(ids.data()), config_.hc_mult,
                   x);
}

void Model::apply_engram(int layer, const ForwardContext& ctx, RowsView x) const {
  const EngramWeights& e = *weights_.layers[static_cast<size_t>(layer)].engram;
  const int cols = hasher_->buckets_per_layer();
  const int64_t hd = config_.engram_head_dim;
  const auto& hashes = ctx.engram_hashes.at(layer);
  // The table rows are gathered and decoded on the backend (the host decoded cols * hd values per
  // row and uploaded them: 24 KB per token and step at the V4.1 shape).
  std::vector<int32_t> index(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) index[i] = static_cast<int32_t>(hashes[i]);
  Buffer index_d(*ops_, ctx.num_rows, cols);
  ops_->upload(reinterpret_cast<const float*>(index.data()), index_d.data(), index_d.size());
  if (!ctx.pending_rows.empty()) hash_pending_rows(layer, ctx, index_d);
  Buffer emb_d(*ops_, ctx.num_rows, cols * hd);
  const backend::Fp8RowTable table{e.table, e.table_scale, e.rows, hd};
  ops_->gather_fp8_rows(table, reinterpret_cast<const int32_t*>(index_d.data()),
                        RowsView{emb_d.data(), ctx.num_rows * cols, hd});
  const int64_t kv_width = static_cast<int64_t>(config_.hc_mult + 1) * config_.dim;
  Buffer kv(*ops_, ctx.num_rows, kv_width);
  ops_->linear(emb_d.view(), e.wkv, kv.view(), true);
  ops_->engram_gate(x, kv.view(), e.qk_weight.data(), config_.hc_mult, config_.norm_eps);
}

Buffer Model::initial_pre_mix(int64_t rows) const {
  Buffer b(*ops_, rows, config_.hc_mult);
  initial_pre_mix(b.view());
  return b;
}

void Model::initial_pre_mix(RowsView pre_mix) const {
  std::vector<float> pre(static_cast<size_t>(pre_mix.rows * config_.hc_mult), 0.0f);
  for (int64_t r = 0; r < pre_mix.rows; ++r) pre[static_cast<size_t>(r * config_.hc_mult)] = 1.0f;
  ops_->upload(pre.data(), pre_mix.data, pre_mix.rows * config_.hc_mult);
}

void Model::final_logits(ConstRowsView x,
                         ConstRowsView pre_mix,
                         const std::vector<int64_t>& rows,
                         std::vector<float>& logits,
                         std::vector<float>* final_hidden,
                         LogitsSelection* selection) const {
  const int64_t n = static_cast<int64_t>(rows.size()), dim = config_.dim;
  Buffer xs(*ops_, n, x.cols), pre(*ops_, n, config_.hc_mult);
  ops_->gather_rows(x, rows.data(), xs.view());
  ops_->gather_rows(pre_mix, rows.data(), pre.view());
  Buffer h(*ops_, n, dim), hn(*ops_, n, dim), out(*ops_, n, config_.vocab_size);
  ops_->hc_collapse(xs.view(), pre.data(), config_.hc_mult, h.view());
  if (final_hidden) *final_hidden = h.to_host();
  ops_->rms_norm(h.view(), weights_.norm.data(), config_.norm_eps, hn.view());
  ops_->linear(hn.view(), weights_.head, out.view(), /*round_bf16=*/false);
  // Into the caller's vector: one kept across steps is not reallocated (and page-faulted) again.
  const int64_t V = config_.vocab_size;
  std::vector<int64_t> full;
  for (int64_t i = 0; i < n; ++i) {
    if (!selection || selection->full[static_cast<size_t>(i)] == kLogitsFull) full.push_back(i);
  }
  const int64_t nf = static_cast<int64_t>(full.size());
  if (selection) {
    // Only when some row wants it: the argmax (or the draw) is one more wait on a device backend.
    selection->argmax.assign(static_cast<size_t>(n), -1);
    if (nf < n) select_tokens(*ops_, out.view(), *selection);
  }
  logits.resize(static_cast<size_t>(nf * V));
  if (nf == n) {
    ops_->download(out.data(), logits.data(), n * V);
  } else if (nf > 0) {
    Buffer kept(*ops_, nf, V);
    ops_->gather_rows(out.view(), full.data(), kept.view());
    ops_->download(kept.data(), logits.data(), nf * V);
  }
}

void Model::end_forward(ForwardContext& ctx) const {
  for (size_t c = 0; c < ctx.chunks.size(); ++c) {
    auto& ch = ctx.chunks[c];
    if (hasher_) ch.seq->engram_history = ctx.engram_next_history[c];
    ch.seq->num_tokens += static_cast<int64_t>(ch.tokens.size());
  }
}

Status Model::forward(ForwardContext& ctx,
                      const std::vector<int64_t>& logits_rows,
                      std::vector<float>& logits,
                      LogitsSelection* selection) {
  if (selection && selection->full.size() != logits_rows.size()) {
    return invalid_argument("forward: the logits selection needs one entry per logits row");
  }
  if (selection && selection->params.size() != selection->full.size() &&
      std::find(selection->full.begin(), selection->full.end(), kLogitsSample) !=
          selection->full.end()) {
    return invalid_argument("forward: sampled rows need one RowParams per logits row");
  }
  // The Engram hashes wait until the first Engram layer: the layers before it are issued first.
  DI_RETURN_IF_ERROR(begin_rows(ctx));
  bool hashed = false;
  for (int64_t r : logits_rows) {
    if (r < 0 || r >= ctx.num_rows) return invalid_argument("forward: logits row out of range");
    const SequenceChunk& ch =
        ctx.chunks[static_cast<size_t>(ctx.row_chunk[static_cast<size_t>(r)])];
    if (ctx.positions[static_cast<size_t>(r)] < ch.replay_from &&
        config_.late_layer_start() < config_.n_layers) {
      return invalid_argument("forward: logits requested for a row that bounded replay skips");
    }
  }
  const int64_t width = static_cast<int64_t>(config_.hc_mult) * config_.dim;
  // x and pre_mix at fixed addresses (the workspace) for the blocks' segment keys.
  BlockRows io = block_rows(ctx.num_rows, /*stream=*/true);
  Buffer x, pre_mix;  // the narrowed rows of a bounded replay
  RowsView xv = io.x, pv = io.pre_mix;
  ctx.token_ids = upload_token_ids(ctx);
  embed(ctx, xv);
  initial_pre_mix(pv);
  // Bounded replay narrows the rows after the last KV source to each prompt's tail.
  ForwardContext tail;
  std::vector<int64_t> kept;  // original row of each row of `tail`
  ForwardContext* active = &ctx;
  const int late = config_.late_layer_start();
  const bool replay = std::any_of(ctx.chunks.begin(), ctx.chunks.end(), [](const SequenceChunk& c) {
    return c.replay_from > c.seq->num_tokens;
  });
  for (int l = 0; l < config_.n_layers; ++l) {
    if (replay && l == late) {
      kept = narrow_to_replay_tail(*ops_, ctx, tail);
      active = &tail;
      Buffer tx(*ops_, tail.num_rows, width), tp(*ops_, tail.num_rows, config_.hc_mult);
      ops_->gather_rows(xv, kept.data(), tx.view());
      ops_->gather_rows(pv, kept.data(), tp.view());
      x = std::move(tx);
      pre_mix = std::move(tp);
      xv = x.view();
      pv = pre_mix.view();
    }
    if (weights_.layers[static_cast<size_t>(l)].engram) {
      if (!hashed) {
        // Before bounded replay narrows the rows (its late layers follow every Engram layer).
        DI_RETURN_IF_ERROR(hash_engram(ctx));
        hashed = true;
      }
      apply_engram(l, *active, xv);
    }
    record_dspark_input(l, *active, xv);
    run_block(l, *active, xv, pv);
  }
  // (No Engram layer ran: the histories still advance.)
  if (!hashed) DI_RETURN_IF_ERROR(hash_engram(ctx));
  std::vector<int64_t> rows = logits_rows;
  if (active != &ctx) {
    for (int64_t& r : rows) {
      auto it = std::lower_bound(kept.begin(), kept.end(), r);
      r = it - kept.begin();  // present: checked before the forward
    }
  }
  // The draft head's KV for these rows beside the output head (they share no buffer).
  const bool side = config_.has_dspark() && open_side_line(*active);
  if (side) {
    seed_dspark(*active);
    ops_->end_side();
  }
  final_logits(xv, pv, rows, logits, nullptr, selection);
  if (side) ops_->join_side();
  if (config_.has_dspark() && !side) seed_dspark(*active);
  end_forward(ctx);
  // A device backend latches its first error and skips the ops after it: the forward failed.
  return ops_->status();
}

void Model::record_dspark_input(int layer, ForwardContext& ctx, ConstRowsView x) const {
  const auto& targets = config_.dspark_target_layer_ids;
  auto it = std::find(targets.begin(), targets.end(), layer);
  if (!config_.has_dspark() || it == targets.end()) return;
  // DSpark reads the mean over copies of its target layers' block inputs (bf16): fp32 sum in copy
  // order, divided by hc, rounded. With hc a power of two that is hc_collapse with weights 1/hc
  // (scaling by a power of two commutes with each rounding), on the backend without a wait.
  const int64_t t = it - targets.begin();
  const int64_t nt = static_cast<int64_t>(targets.size());
  const int hc = config_.hc_mult;
  const int64_t dim = config_.dim;
  float* dst = ctx.main_hidden.data() + t * dim;
  if ((hc & (hc - 1)) == 0) {
    const Buffer pre(*ops_, x.rows, hc);
    ops_->fill(pre.data(), 1.0f / static_cast<float>(hc), x.rows * hc);
    Buffer mean(*ops_, x.rows, dim);
    ops_->hc_collapse(x, pre.data(), hc, mean.view());
    ops_->copy_2d(mean.data(), dim, dst, nt * dim, dim, x.rows);
    return;
  }
  std::vector<float> host(static_cast<size_t>(x.rows * x.cols)),
      mean(static_cast<size_t>(x.rows * dim));
  ops_->download(x.data, host.data(), x.rows * x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t d = 0; d < dim; ++d) {
      float s = 0;
      for (int k = 0; k < hc; ++k) s += host[static_cast<size_t>(r * x.cols + k * dim + d)];
      mean[static_cast<size_t>(r * dim + d)] = round_bf16(s / static_cast<float>(hc));
    }
  }
  const Buffer m = backend::upload_rows(*ops_, mean, dim);
  ops_->copy_2d(m.data(), dim, dst, nt * dim, dim, x.rows);
}

}  // namespace di::model
