// The CPU backend: every op of backend::Ops on host memory, split across a thread pool by rows,
// queries or output columns. Each output element is computed by the same reference routine
// whatever the split, so results are bitwise independent of batch size and thread count.
#pragma once

#include "backend/ops.h"
#include "util/thread_pool.h"

namespace di::backend {

class CpuOps final : public Ops {
 public:
  explicit CpuOps(ThreadPool& pool) : pool_(pool) {}
  const char* name() const override { return "cpu"; }

  void linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const override;
  void rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const override;
  void fake_quant_fp8(RowsView x, int block) const override;
  void fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const override;
  void rope(RowsView x,
            int num_heads,
            int head_dim,
            int rope_offset,
            const int64_t* positions,
            const RopeTable& table,
            bool inverse) const override;
  void sparse_attention(const SparseAttentionArgs& args) const override;
  void write_kv(ConstRowsView rows,
                KvFormat format,
                const int32_t* slots,
                uint8_t* pool) const override;
  void kv_attention(const KvAttentionArgs& args) const override;
  void index_scores(const IndexScoreArgs& args) const override;
  void index_topk(const IndexTopkArgs& args) const override;
  void candidate_blocks(const CandidateBlockArgs& args) const override;
  void paged_rows(const PagedRowsArgs& args) const override;
  void hc_mixes(ConstRowsView x,
                const float* fn,
                const float* scale,
                const float* base,
                int hc,
                int sinkhorn_iters,
                float hc_eps,
                float norm_eps,
                HcCoefficients* out) const override;
  void hc_collapse(ConstRowsView x, const float* pre, int hc, RowsView y) const override;
  void hc_expand(ConstRowsView y,
                 ConstRowsView residual,
                 const HcCoefficients* coeff,
                 int hc,
                 RowsView out) const override;
  void moe_route(ConstRowsView x,
                 const WeightView& gate,
                 const float* bias,
                 const RouteParams& params,
                 int32_t* experts,
                 float* weights) const override;
  void swiglu(ConstRowsView gate,
              ConstRowsView up,
              const float* row_weight,
              float limit,
              RowsView out) const override;
  void engram_gate(
      RowsView x, ConstRowsView kv, const float* qk_weight, int hc, float eps) const override;
  void softmax_pool(const float* const* kv,
                    const float* const* score,
                    int64_t groups,
                    int group,
                    int64_t dim,
                    float* out) const override;
  void embed_rows(const WeightView& table,
                  const int32_t* tokens,
                  int copies,
                  RowsView out) const override;
  void gather_fp8_rows(const Fp8RowTable& table, const int32_t* index, RowsView out) const override;
  void argmax_rows_to(ConstRowsView x, int32_t* out) const override;
  void sample_rows_to(RowsView x, const kernels::sample::RowsArgs& a, int32_t* out) const override;
  void engram_hash_rows(const EngramHashArgs& a) const override;
  void add_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const override;
  void add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const override;
  void scale_round_bf16(RowsView x, float scale) const override;

 private:
  ThreadPool& pool_;
};

}  // namespace di::backend
