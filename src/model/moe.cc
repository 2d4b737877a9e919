// The MoE FFN of every layer (spec §1.5; reference Gate, Expert, MoE): sqrt-softplus routing with
// a selection-only bias, clamped SwiGLU experts with the routing weight applied before w2, FP4
// routed experts and an FP8 shared expert, summed in fp32 in expert order.
#include <algorithm>
#include <cmath>
#include <functional>

#include "model/model.h"
#include "tensor/numeric.h"

namespace di::model {

namespace {

backend::ScoreFunc score_func(const std::string& name) {
  if (name == "sigmoid") return backend::ScoreFunc::kSigmoid;
  if (name == "softmax") return backend::ScoreFunc::kSoftmax;
  return backend::ScoreFunc::kSqrtSoftplus;
}

// y = w2(swiglu(w1 x, w3 x) * weight) for the rows of x (bf16 out).
void run_expert(const backend::Ops& ops,
                const ExpertWeights& e,
                ConstRowsView x,
                const float* row_weight,
                float limit,
                RowsView y) {
  const int64_t n = x.rows, inter = e.w1.out_features;
  Buffer g(ops, n, inter), u(ops, n, inter);
  RowsView gv = g.view(), uv = u.view();
  ops.linear_pair(x, e.w1, gv, e.w3, uv, true);
  ops.swiglu(gv, uv, row_weight, limit, gv);
  ops.linear(gv, e.w2, y, true);
}

}  // namespace

std::vector<float> Model::router_margins(ConstRowsView u,
                                         const MoeWeights& m,
                                         const backend::RouteParams& p) const {
  Buffer raw_d(*ops_, u.rows, p.num_experts);
  ops_->linear(u, m.gate, raw_d.view(), false);
  const std::vector<float> raw = raw_d.to_host();
  std::vector<float> gaps;
  for (int64_t r = 0; r < u.rows; ++r) {
    std::vector<float> biased(static_cast<size_t>(p.num_experts));
    for (int e = 0; e < p.num_experts; ++e) {
      float s = raw[static_cast<size_t>(r * p.num_experts + e)] / p.gate_temp;
      s = s > 20.0f ? std::sqrt(s) : std::sqrt(std::log1p(std::exp(s)));
      biased[static_cast<size_t>(e)] = s + m.bias[static_cast<size_t>(e)];
    }
    std::sort(biased.begin(), biased.end(), std::greater<float>());
    gaps.push_back(p.topk < p.num_experts ? biased[static_cast<size_t>(p.topk - 1)] -
                                                biased[static_cast<size_t>(p.topk)]
                                          : INFINITY);
  }
  return gaps;
}

void Model::moe(int layer, const ForwardContext* ctx, ConstRowsView u, RowsView out) const {
  const MoeWeights& m = weights_.layers[static_cast<size_t>(layer)].ffn;
  const int64_t T = u.rows, dim = config_.dim;
  backend::RouteParams p;
  p.num_experts = config_.routed_experts_of(layer);
  p.topk = config_.activated_experts_of(layer);
  p.score_func = score_func(config_.score_func);
  p.gate_temp = config_.gate_temp;
  p.norm_topk_prob = config_.norm_topk_prob;
  p.route_scale = config_.route_scale;
  std::vector<int32_t> experts(static_cast<size_t>(T * p.topk));
  std::vector<float> weights(static_cast<size_t>(T * p.topk));
  const bool tracing = ctx && ctx->trace;
  auto record = [&] {
    if (!tracing) return;
    ctx->trace->moe_experts[layer] = experts;
    ctx->trace->moe_weights[layer] = weights;
    ctx->trace->moe_gap[layer] = router_margins(u, m, p);
  };
  Buffer shared(*ops_, T, dim);
  // The shared expert beside the router and the routed experts: a fused path joins the side line
  // before its combine reads `shared`.
  const bool side = T <= kSideLineRows && !tracing && ops_->begin_side();
  run_expert(*ops_, m.shared, u, nullptr, config_.swiglu_limit, shared.view());
  if (side) ops_->end_side();

  // A backend with a fused MoE keeps the routing on its side (no host wait unless tracing).
  if (ops_->fused_moe(u, m.gate, m.bias.data(), p,
                      backend::MoeExpertViews{m.experts_w1, m.experts_w3, m.experts_w2},
                      config_.swiglu_limit, shared.view(), out, tracing ? experts.data() : nullptr,
                      tracing ? weights.data() : nullptr)) {
    record();
    return;
  }

  if (side) ops_->join_side();
  ops_->moe_route(u, m.gate, m.bias.data(), p, experts.data(), weights.data());
  record();

  // The combine in the reference's order: routed experts' rows added into an fp32 accumulator in
  // expert index order, then the shared expert, one bf16 rounding.
  Buffer acc(*ops_, T, dim);
  ops_->fill(acc.data(), 0.0f, T * dim);
  std::vector<float> ws;
  std::vector<int64_t> rows;
  for (int e = 0; e < p.num_experts; ++e) {
    rows.clear();
    ws.clear();
    for (int64_t r = 0; r < T; ++r) {
      for (int k = 0; k < p.topk; ++k) {
        if (experts[static_cast<size_t>(r * p.topk + k)] == e) {
          rows.push_back(r);
          ws.push_back(weights[static_cast<size_t>(r * p.topk + k)]);
        }
      }
    }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    Buffer xs(*ops_, n, dim), ys_d(*ops_, n, dim);
    ops_->gather_rows(u, rows.data(), xs.view());
    run_expert(*ops_, m.experts[static_cast<size_t>(e)], xs.view(), ws.data(), config_.swiglu_limit,
               ys_d.view());
    ops_->add_rows(ys_d.view(), rows.data(), acc.view());
  }
  ops_->add_round_bf16(acc.view(), shared.view(), out);
}

}  // namespace di::model
