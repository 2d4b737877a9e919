// TracingOps for the ops of the attention, indexer, hyper-connection, MoE and sampling stages:
// each is forwarded, then what it wrote is recorded (tracing_ops.h).
#include <string>

#include "backend/tracing_ops.h"

namespace di::backend {

void TracingOps::sparse_attention(const SparseAttentionArgs& a) const {
  inner_->sparse_attention(a);
  backend_bytes("sparse_attention", "out", a.out,
                float_bytes(a.num_queries * a.num_heads * a.head_dim));
}

void TracingOps::write_kv(ConstRowsView r,
                          KvFormat format,
                          const int32_t* slots,
                          uint8_t* pool) const {
  inner_->write_kv(r, format, slots, pool);
  // The row's codes and scales, not the padding up to the stride (never written).
  const int64_t stride = kv_row_stride(format, r.cols), bytes = kv_row_bytes(format, r.cols);
  for (int64_t i = 0; i < r.rows; ++i) {
    const int64_t slot = slots ? slots[i] : i;
    if (slot < 0) continue;
    backend_bytes("write_kv", "slot" + std::to_string(slot), pool + slot * stride,
                  static_cast<size_t>(bytes));
  }
}

void TracingOps::kv_attention(const KvAttentionArgs& a) const {
  inner_->kv_attention(a);
  backend_bytes("kv_attention", "out", a.out,
                float_bytes(a.num_queries * a.num_heads * a.head_dim));
}

void TracingOps::index_scores(const IndexScoreArgs& a) const {
  inner_->index_scores(a);
  backend_bytes("index_scores", "scores", a.scores, float_bytes(a.num_queries * a.num_keys));
}

void TracingOps::index_topk(const IndexTopkArgs& a) const {
  inner_->index_topk(a);
  backend_bytes("index_topk", "selected", a.selected, int_bytes(a.num_queries * a.width));
}

void TracingOps::candidate_blocks(const CandidateBlockArgs& a) const {
  inner_->candidate_blocks(a);
  backend_bytes("candidate_blocks", "blocks", a.blocks, int_bytes(a.num_queries * a.width));
}

void TracingOps::paged_rows(const PagedRowsArgs& a) const {
  inner_->paged_rows(a);
  backend_bytes("paged_rows", "out", a.out, int_bytes(a.num_rows * a.width));
}

void TracingOps::hc_mixes(ConstRowsView x,
                          const float* fn,
                          const float* scale,
                          const float* base,
                          int hc,
                          int sinkhorn_iters,
                          float hc_eps,
                          float norm_eps,
                          HcCoefficients* out) const {
  inner_->hc_mixes(x, fn, scale, base, hc, sinkhorn_iters, hc_eps, norm_eps, out);
  backend_bytes("hc_mixes", "coefficients", out,
                sizeof(HcCoefficients) * static_cast<size_t>(x.rows));
}

void TracingOps::hc_collapse(ConstRowsView x, const float* pre, int hc, RowsView y) const {
  inner_->hc_collapse(x, pre, hc, y);
  rows("hc_collapse", "y", y);
}

void TracingOps::hc_expand(ConstRowsView y,
                           ConstRowsView residual,
                           const HcCoefficients* coeff,
                           int hc,
                           RowsView out) const {
  inner_->hc_expand(y, residual, coeff, hc, out);
  rows("hc_expand", "out", out);
}

void TracingOps::moe_route(ConstRowsView x,
                           const WeightView& gate,
                           const float* bias,
                           const RouteParams& params,
                           int32_t* experts,
                           float* weights) const {
  inner_->moe_route(x, gate, bias, params, experts, weights);
  host_bytes("moe_route", "experts", experts, int_bytes(x.rows * params.topk));
  host_bytes("moe_route", "weights", weights, float_bytes(x.rows * params.topk));
}

void TracingOps::swiglu(ConstRowsView gate,
                        ConstRowsView up,
                        const float* row_weight,
                        float limit,
                        RowsView out) const {
  inner_->swiglu(gate, up, row_weight, limit, out);
  rows("swiglu", "out", out);
}

void TracingOps::engram_gate(
    RowsView x, ConstRowsView kv, const float* qk_weight, int hc, float eps) const {
  inner_->engram_gate(x, kv, qk_weight, hc, eps);
  rows("engram_gate", "x", x);
}

bool TracingOps::fused_moe(ConstRowsView x,
                           const WeightView& gate,
                           const float* bias,
                           const RouteParams& params,
                           const MoeExpertViews& experts,
                           float swiglu_limit,
                           ConstRowsView shared,
                           RowsView out,
                           int32_t* experts_out,
                           float* weights_out) const {
  if (!inner_->fused_moe(x, gate, bias, params, experts, swiglu_limit, shared, out, experts_out,
                         weights_out)) {
    return false;
  }
  rows("fused_moe", "out", out);
  if (experts_out) host_bytes("fused_moe", "experts", experts_out, int_bytes(x.rows * params.topk));
  if (weights_out) {
    host_bytes("fused_moe", "weights", weights_out, float_bytes(x.rows * params.topk));
  }
  return true;
}

void TracingOps::embed_rows(const WeightView& table,
                            const int32_t* tokens,
                            int copies,
                            RowsView out) const {
  inner_->embed_rows(table, tokens, copies, out);
  rows("embed_rows", "out", out);
}

void TracingOps::gather_fp8_rows(const Fp8RowTable& table,
                                 const int32_t* index,
                                 RowsView out) const {
  inner_->gather_fp8_rows(table, index, out);
  rows("gather_fp8_rows", "out", out);
}

void TracingOps::engram_hash_rows(const EngramHashArgs& a) const {
  inner_->engram_hash_rows(a);
  // The rows it writes are scattered; the gather that reads them records its output.
}

void TracingOps::argmax_rows_to(ConstRowsView x, int32_t* out) const {
  inner_->argmax_rows_to(x, out);
  backend_bytes("argmax_rows", "tokens", out, int_bytes(x.rows));
}

void TracingOps::sample_rows_to(RowsView x,
                                const kernels::sample::RowsArgs& a,
                                int32_t* out) const {
  inner_->sample_rows_to(x, a, out);
  rows("sample_rows", "logits", x);
  backend_bytes("sample_rows", "tokens", out, int_bytes(x.rows));
}

void TracingOps::add_rows(ConstRowsView src, const int64_t* idx, RowsView dst) const {
  inner_->add_rows(src, idx, dst);
  rows("add_rows", "dst", dst);
}

void TracingOps::softmax_pool(const float* const* kv,
                              const float* const* score,
                              int64_t groups,
                              int group,
                              int64_t dim,
                              float* out) const {
  inner_->softmax_pool(kv, score, groups, group, dim, out);
  backend_bytes("softmax_pool", "out", out, float_bytes(groups * dim));
}

}  // namespace di::backend
