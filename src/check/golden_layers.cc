// Layer-by-layer golden checks: each layer runs on its recorded inputs (a prefill of the whole
// prompt from position 0), layers that reuse a source's entries or selection take them from that
// source's run in the same pass; Engram runs on the recorded residual before its layer.
#include <algorithm>
#include <set>

#include "check/golden_internal.h"
#include "check/golden_metrics.h"
#include "model/state_pool.h"

namespace di::check {

namespace {

std::string layer_name(const std::string& seq, int layer) {
  return seq + ".layer" + std::to_string(layer);
}

// Golden selection row -> ascending entries without -1 padding.
std::vector<int32_t> golden_selection(const std::vector<int64_t>& g, int64_t row, int64_t k) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < k; ++i) {
    int64_t v = g[static_cast<size_t>(row * k + i)];
    if (v >= 0) out.push_back(static_cast<int32_t>(v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Status check_layers(const GoldenContext& g, int seq_index, CheckReport& report) {
  const model::Model& m = *g.model;
  const model::ModelConfig& c = m.config();
  const std::string sp = "seq" + std::to_string(seq_index);
  DI_ASSIGN_OR_RETURN(auto prompt64, g.data->ints(sp + ".prompt"));
  std::vector<int32_t> prompt(prompt64.begin(), prompt64.end());
  const int64_t L = static_cast<int64_t>(prompt.size()), hc = c.hc_mult, dim = c.dim;
  const int64_t width = hc * dim;
  DI_ASSIGN_OR_RETURN(auto block_in, g.data->floats(sp + ".full.block_in"));
  DI_ASSIGN_OR_RETURN(auto block_in_mix, g.data->floats(sp + ".full.block_in_mix"));
  DI_ASSIGN_OR_RETURN(auto block_out, g.data->floats(sp + ".full.block_out"));
  DI_ASSIGN_OR_RETURN(auto block_out_mix, g.data->floats(sp + ".full.block_out_mix"));
  DI_ASSIGN_OR_RETURN(auto moe_experts, g.data->ints(sp + ".full.moe_experts"));
  DI_ASSIGN_OR_RETURN(auto moe_gap, g.data->floats(sp + ".full.moe_gap"));

  DI_ASSIGN_OR_RETURN(auto pool, model::StatePool::create(c, {1, L + 8, 64}, m.ops()));
  DI_ASSIGN_OR_RETURN(auto seq, pool.create_sequence());
  model::ForwardContext ctx;
  model::ForwardTrace trace;
  ctx.pool = &pool;
  ctx.trace = &trace;
  ctx.chunks.push_back({&seq, prompt});
  DI_RETURN_IF_ERROR(m.begin_forward(ctx));

  // Engram on the recorded residual (embedding copies for layer 0). The model computes in its
  // backend's memory; the comparisons read host copies.
  backend::Buffer xd(m.ops(), L, width);
  for (int layer : c.engram_layer_ids) {
    if (layer == 0) {
      m.embed(ctx, xd.view());
    } else {
      xd.from_host(block_out.data() + (layer - 1) * L * width);
    }
    m.apply_engram(layer, ctx, xd.view());
    const std::vector<float> x = xd.to_host();
    Diff d = diff_rows(x.data(), block_in.data() + layer * L * width, L, width);
    report.check(layer_name(sp, layer) + ".engram", d.max_abs <= g.tol.engram_max_abs,
                 "max_abs " + fmt(d.max_abs) + " (<= " + fmt(g.tol.engram_max_abs) + ")");
  }

  // Positions left out per index source after a selection mismatch (README "Comparing" 2).
  std::map<int, std::vector<bool>> excluded;
  for (int layer = 0; layer < c.n_layers; ++layer) {
    xd.from_host(block_in.data() + layer * L * width);
    backend::Buffer pre_d(m.ops(), L, hc);
    pre_d.from_host(block_in_mix.data() + layer * L * hc);
    m.run_block(layer, ctx, xd.view(), pre_d.view());
    const std::vector<float> x = xd.to_host(), pre_mix = pre_d.to_host();
    const std::string name = layer_name(sp, layer);

    if (g.topk_binding && c.is_index_source(layer)) {
      DI_RETURN_IF_ERROR(check_selection(g, sp, layer, L, trace, report, excluded[layer]));
    }
    std::vector<bool> include(static_cast<size_t>(L), true);
    const int src = c.index_source_of(layer);
    if (src >= 0 && excluded.count(src)) {
      for (int64_t r = 0; r < L; ++r)
        include[static_cast<size_t>(r)] = !excluded[src][static_cast<size_t>(r)];
    }
    Diff d = diff_rows(x.data(), block_out.data() + layer * L * width, L, width, include);
    report.check(name + ".block_out",
                 d.max_abs <= g.tol.block_out_max_abs && d.mean_abs <= g.tol.block_out_mean_abs,
                 "max_abs " + fmt(d.max_abs) + " (<= " + fmt(g.tol.block_out_max_abs) +
                     "), mean_abs " + fmt(d.mean_abs) + " (<= " + fmt(g.tol.block_out_mean_abs) +
                     "), rows " + std::to_string(d.count / width) + "/" + std::to_string(L));
    Diff dm = diff_rows(pre_mix.data(), block_out_mix.data() + layer * L * hc, L, hc, include);
    report.check(name + ".block_out_mix", dm.max_abs <= g.tol.mix_max_abs,
                 "max_abs " + fmt(dm.max_abs) + " (<= " + fmt(g.tol.mix_max_abs) + ")");

    const int k = c.activated_experts_of(layer);
    const auto& ours = trace.moe_experts.at(layer);
    int compared = 0, differ = 0;
    for (int64_t r = 0; r < L; ++r) {
      if (moe_gap[static_cast<size_t>(layer * L + r)] < 1e-3f) continue;
      std::set<int64_t> a(moe_experts.begin() + (layer * L + r) * k,
                          moe_experts.begin() + (layer * L + r + 1) * k);
      std::set<int64_t> b(ours.begin() + r * k, ours.begin() + (r + 1) * k);
      ++compared;
      if (a != b) ++differ;
    }
    report.check(name + ".moe_experts", differ == 0,
                 std::to_string(compared - differ) + "/" + std::to_string(compared) +
                     " identical where moe_gap >= 1e-3");
  }
  DI_RETURN_IF_ERROR(check_compressed(g, sp, ctx, seq, report));
  pool.release_sequence(seq);
  return Status();
}

Status check_selection(const GoldenContext& g,
                       const std::string& sp,
                       int layer,
                       int64_t L,
                       const model::ForwardTrace& trace,
                       CheckReport& report,
                       std::vector<bool>& excluded) {
  const model::ModelConfig& c = g.model->config();
  const int k = c.index_topk;
  DI_ASSIGN_OR_RETURN(auto sel,
                      g.data->ints(sp + ".full.index_topk.layer" + std::to_string(layer)));
  DI_ASSIGN_OR_RETURN(auto gaps, g.data->floats(sp + ".full.index_rel_gap"));
  const auto& sources = c.index_source_layers;
  const int64_t gap_row = std::find(sources.begin(), sources.end(), layer) - sources.begin();
  const auto& ours = trace.selections.at(layer);
  excluded.assign(static_cast<size_t>(L), false);
  int compared = 0, differ = 0, differ_fragile = 0;
  for (int64_t r = 0; r < L; ++r) {
    const bool same = golden_selection(sel, r, k) == ours[static_cast<size_t>(r)];
    if (!same) excluded[static_cast<size_t>(r)] = true;
    if (gaps[static_cast<size_t>(gap_row * L + r)] < 0.02f) {
      if (!same) ++differ_fragile;
      continue;
    }
    ++compared;
    if (!same) ++differ;
  }
  const std::string name = sp + ".layer" + std::to_string(layer);
  report.check(name + ".index_topk", differ == 0,
               std::to_string(compared - differ) + "/" + std::to_string(compared) +
                   " identical where index_rel_gap >= 0.02 (" + std::to_string(differ_fragile) +
                   " fragile positions differ; left out with their reusers)");
  if (layer == c.candidate_source_layer) {
    DI_ASSIGN_OR_RETURN(auto cand,
                        g.data->ints(sp + ".full.candidates.layer" + std::to_string(layer)));
    DI_ASSIGN_OR_RETURN(auto cgap, g.data->floats(sp + ".full.candidate_rel_gap"));
    const auto& blocks = trace.candidate_blocks.at(layer);
    const int64_t width = L / c.compress_ratios[layer];
    int cmp = 0, bad = 0;
    for (int64_t r = 0; r < L; ++r) {
      if (cgap[static_cast<size_t>(r)] < 0.02f) continue;
      ++cmp;
      const auto& b = blocks[static_cast<size_t>(r)];
      for (int64_t e = 0; e < width; ++e) {
        bool in = std::binary_search(b.begin(), b.end(),
                                     static_cast<int32_t>(e / c.candidate_block_size));
        if (in != (cand[static_cast<size_t>(r * L + e)] != 0)) {
          ++bad;
          break;
        }
      }
    }
    report.check(name + ".candidates", bad == 0,
                 std::to_string(cmp - bad) + "/" + std::to_string(cmp) +
                     " identical where candidate_rel_gap >= 0.02");
  }
  return Status();
}

Status check_compressed(const GoldenContext& g,
                        const std::string& sp,
                        model::ForwardContext& ctx,
                        model::SequenceState& seq,
                        CheckReport& report) {
  const model::ModelConfig& c = g.model->config();
  for (int layer : c.kv_source_layers) {
    const int stream = ctx.pool->stream_of_layer(layer);
    for (bool keys : {false, true}) {
      const std::string key =
          sp + (keys ? ".full.index_k.layer" : ".full.compress_kv.layer") + std::to_string(layer);
      if (!g.data->has(key)) continue;
      DI_ASSIGN_OR_RETURN(auto ref, g.data->floats(key));
      const int64_t width = keys ? c.index_head_dim : c.head_dim;
      const int64_t n = static_cast<int64_t>(ref.size()) / width;
      std::vector<float> ours(ref.size());
      const int64_t have = seq.streams[static_cast<size_t>(stream)].num_entries;
      for (int64_t e = 0; e < std::min(n, have); ++e) {
        if (keys) {
          g.model->ops().download(ctx.pool->index_key_row(seq, stream, e), ours.data() + e * width,
                                  width);
        } else {
          ctx.pool->download_compressed_kv(seq, stream, e, ours.data() + e * width);
        }
      }
      Diff d = diff_rows(ours.data(), ref.data(), n, width);
      report.check(key, have == n && d.max_abs <= g.tol.block_out_max_abs,
                   std::to_string(have) + "/" + std::to_string(n) + " entries, max_abs " +
                       fmt(d.max_abs) + " (<= " + fmt(g.tol.block_out_max_abs) + "), mean_abs " +
                       fmt(d.mean_abs));
    }
  }
  return Status();
}

}  // namespace di::check
