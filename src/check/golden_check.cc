#include "check/golden_check.h"

#include <algorithm>

#include "check/golden_internal.h"
#include "check/golden_metrics.h"
#include "model/engram/multipliers.h"

namespace di::check {

void CheckReport::check(const std::string& name, bool ok, const std::string& detail) {
  (ok ? passed_ : failed_)++;
  out_ << (ok ? "PASS  " : "FAIL  ") << name << "  " << detail << "\n";
  out_.flush();
}

void CheckReport::info(const std::string& line) {
  out_ << "info  " << line << "\n";
}

namespace {

Tolerances read_tolerances(const nlohmann::json& m) {
  Tolerances t;
  const auto& tol = m.value("tolerances", nlohmann::json::object());
  const auto& lbl = tol.value("layer_by_layer", nlohmann::json::object());
  t.block_out_max_abs = lbl.value("block_out_max_abs", t.block_out_max_abs);
  t.block_out_mean_abs = lbl.value("block_out_mean_abs", t.block_out_mean_abs);
  t.mix_max_abs = lbl.value("block_out_mix_max_abs", t.mix_max_abs);
  t.engram_max_abs = lbl.value("engram_out_max_abs", t.engram_max_abs);
  const auto& e2e = tol.value("end_to_end_per_sequence", nlohmann::json::object());
  t.logits_max_abs = e2e.value("logits_max_abs", t.logits_max_abs);
  t.logits_mean_abs = e2e.value("logits_mean_abs", t.logits_mean_abs);
  t.argmax_agreement_min = e2e.value("full_logits_argmax_agreement_min", t.argmax_agreement_min);
  const std::string greedy = tol.value("greedy_tokens", std::string());
  t.greedy_tokens_required = greedy.find("not required") == std::string::npos;
  const auto& spread = m.value("observed_spread", nlohmann::json::object())
                           .value("gpu_vs_cpu_end_to_end", nlohmann::json::object())
                           .value("dspark.logits", nlohmann::json::object());
  t.dspark_max_abs = std::max(t.logits_max_abs, spread.value("max_abs", 0.0));
  t.dspark_mean_abs = std::max(t.logits_mean_abs, spread.value("mean_abs", 0.0));
  t.dspark_token_agreement_min = spread.value("argmax_agree_min", t.dspark_token_agreement_min);
  const auto& fr = m.value("fragile_thresholds", nlohmann::json::object());
  t.fragile_logit_gap = fr.value("logit_gap", t.fragile_logit_gap);
  t.fragile_moe_gap = fr.value("moe_gap", t.fragile_moe_gap);
  t.fragile_index_rel_gap = fr.value("index_rel_gap", t.fragile_index_rel_gap);
  t.fragile_candidate_rel_gap = fr.value("candidate_rel_gap", t.fragile_candidate_rel_gap);
  return t;
}

Status check_exact(const GoldenContext& g, CheckReport& report) {
  const model::Model& m = *g.model;
  const auto& seqs = g.data->manifest().at("sequences");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string sp = "seq" + std::to_string(i);
    DI_ASSIGN_OR_RETURN(auto prompt, g.data->ints(sp + ".prompt"));
    report.check(
        sp + ".prompt", prompt == seqs[i].at("prompt").get<std::vector<int64_t>>(),
        "golden prompt equals the manifest's (" + std::to_string(prompt.size()) + " tokens)");
    DI_ASSIGN_OR_RETURN(auto forced, g.data->ints(sp + ".forced.tokens"));
    report.check(sp + ".forced.tokens", forced == seqs[i].at("forced").get<std::vector<int64_t>>(),
                 "golden forced tokens equal the manifest's");
  }
  if (!m.engram_layout()) return Status();
  DI_ASSIGN_OR_RETURN(auto token_map, g.data->ints("engram.token_map"));
  const auto& ours = m.engram_token_map();
  bool same = token_map.size() <= ours.size();
  for (size_t i = 0; same && i < token_map.size(); ++i) same = token_map[i] == ours[i];
  report.check("engram.token_map", same,
               "compressed ids of " + std::to_string(token_map.size()) + " tokens");
  const auto& layout = *m.engram_layout();
  std::vector<int64_t> primes, offsets;
  for (size_t l = 0; l < layout.primes.size(); ++l) {
    primes.insert(primes.end(), layout.primes[l].begin(), layout.primes[l].end());
    offsets.insert(offsets.end(), layout.offsets[l].begin(), layout.offsets[l].end());
  }
  DI_ASSIGN_OR_RETURN(auto gp, g.data->ints("engram.primes"));
  DI_ASSIGN_OR_RETURN(auto go, g.data->ints("engram.offsets"));
  report.check("engram.primes", gp == primes, "bucket primes per layer, n-gram and head");
  report.check("engram.offsets", go == offsets, "bucket offsets per layer");
  DI_ASSIGN_OR_RETURN(auto gm, g.data->ints("engram.multipliers"));
  const auto& cfg = m.config();
  std::vector<int64_t> lids(cfg.engram_layer_ids.begin(), cfg.engram_layer_ids.end());
  DI_ASSIGN_OR_RETURN(auto mult,
                      engram::hash_multipliers_for_layers(lids, cfg.engram_max_ngram_size,
                                                          cfg.engram_compressed_vocab_size));
  std::vector<int64_t> flat;
  for (const auto& r : mult) flat.insert(flat.end(), r.begin(), r.end());
  report.check("engram.multipliers", gm == flat, "hash multipliers (numpy default_rng per layer)");

  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string sp = "seq" + std::to_string(i);
    DI_ASSIGN_OR_RETURN(auto prompt, g.data->ints(sp + ".prompt"));
    DI_ASSIGN_OR_RETURN(auto hashes, g.data->ints(sp + ".full.engram_hash"));
    DI_ASSIGN_OR_RETURN(
        auto pool,
        model::StatePool::create(cfg, {1, static_cast<int64_t>(prompt.size()) + 8, 64}, m.ops()));
    DI_ASSIGN_OR_RETURN(auto seq, pool.create_sequence());
    model::ForwardContext ctx;
    ctx.pool = &pool;
    ctx.chunks.push_back({&seq, std::vector<int32_t>(prompt.begin(), prompt.end())});
    DI_RETURN_IF_ERROR(m.begin_forward(ctx));
    const size_t nl = cfg.engram_layer_ids.size();
    const size_t cols = hashes.size() / (prompt.size() * nl);
    bool equal = true;
    for (size_t r = 0; r < prompt.size() && equal; ++r) {
      for (size_t l = 0; l < nl && equal; ++l) {
        const auto& h = ctx.engram_hashes.at(cfg.engram_layer_ids[l]);
        for (size_t c = 0; c < cols; ++c)
          equal = equal && h[r * cols + c] == hashes[(r * nl + l) * cols + c];
      }
    }
    report.check(sp + ".full.engram_hash", equal, "table rows of every position and Engram layer");
    pool.release_sequence(seq);
  }
  return Status();
}

}  // namespace

Status run_golden_check_impl(const std::string& dir, const backend::Ops& ops, CheckReport& report) {
  DI_ASSIGN_OR_RETURN(GoldenData data, GoldenData::open(dir));
  DI_ASSIGN_OR_RETURN(auto model, model::Model::load(dir + "/checkpoint", ops));
  GoldenContext g;
  g.data = &data;
  g.model = model.get();
  g.tol = read_tolerances(data.manifest());
  g.topk_binding = data.manifest().value("index_topk_binding", false);
  DI_RETURN_IF_ERROR(check_exact(g, report));
  const size_t n = data.manifest().at("sequences").size();
  for (size_t i = 0; i < n; ++i) {
    DI_RETURN_IF_ERROR(check_layers(g, static_cast<int>(i), report));
    DI_RETURN_IF_ERROR(check_end_to_end(g, static_cast<int>(i), report));
  }
  return Status();
}

Status run_golden_check(const std::string& dir, const backend::Ops& ops, CheckReport& report) {
  try {
    return run_golden_check_impl(dir, ops, report);
  } catch (const nlohmann::json::exception& e) {
    // A manifest with missing or mistyped fields.
    return invalid_argument(dir + "/manifest.json: " + e.what());
  }
}

}  // namespace di::check
