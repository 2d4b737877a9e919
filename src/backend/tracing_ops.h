// A backend that runs another one and records, after every op, a checksum (checksum.h) of what the
// op wrote: `--trace-ops FILE` on the commands that run the model. Two runs that should agree
// bit for bit (two processes, two batch compositions, the CPU and `--cuda-gemm exact`) are
// compared by diffing their traces: the first differing line names the first op whose output
// differs, which is where a race, an uninitialized read or a numerics difference starts.
//
// A device backend computes the checksums on the device in stream order (Ops::record_checksum)
// and the trace waits for them only every few thousand records, so tracing changes the timing of
// the traced run little: no host wait per op. Segments are never replayed (each op must run to be
// traced) and every other call is forwarded unchanged, side lines included.
//
// Each line of the file: `<record> <op> <what> <bytes> <checksum in hex>`.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "util/status.h"

namespace di::backend {

class TracingOps final : public Ops {
 public:
  // Fails when `path` cannot be opened for writing.
  static Expected<std::unique_ptr<TracingOps>> create(std::unique_ptr<Ops> inner,
                                                      const std::string& path);
  ~TracingOps() override;
  TracingOps(const TracingOps&) = delete;
  TracingOps& operator=(const TracingOps&) = delete;

  // Writes the records so far (waits for the backend). The destructor flushes too.
  Status flush() const;

  const char* name() const override { return inner_->name(); }
  Status status() const override;
  uint64_t host_syncs() const override { return inner_->host_syncs(); }
  double host_wait_seconds() const override { return inner_->host_wait_seconds(); }
  std::vector<OpTime> take_op_profile() const override { return inner_->take_op_profile(); }
  bool begin_segment(uint64_t /*key*/) const override { return true; }  // always issue the ops
  void end_segment() const override {}
  bool begin_side() const override { return inner_->begin_side(); }
  void end_side() const override { inner_->end_side(); }
  void join_side() const override { inner_->join_side(); }
  int64_t side_lines() const override { return inner_->side_lines(); }

  float* allocate(int64_t count) const override { return inner_->allocate(count); }
  void deallocate(float* p) const override { inner_->deallocate(p); }
  void upload(const float* host, float* dst, int64_t count) const override;
  void download(const float* src, float* host, int64_t count) const override;
  uint64_t download_async(const float* src, float* host, int64_t count) const override;
  void wait_download(uint64_t ticket) const override { inner_->wait_download(ticket); }
  void copy_2d(const float* src,
               int64_t src_stride,
               float* dst,
               int64_t dst_stride,
               int64_t width,
               int64_t rows) const override;
  void fill(float* dst, float value, int64_t count) const override;
  void gather_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const override;
  void copy_rows(const float* const* src,
                 float* const* dst,
                 int64_t n,
                 int64_t width) const override;

  void linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const override;
  void linear_pair(ConstRowsView x,
                   const WeightView& w0,
                   RowsView y0,
                   const WeightView& w1,
                   RowsView y1,
                   bool round_bf16) const override;
  void grouped_linear(
      ConstRowsView x, const WeightView& w, int groups, RowsView y, bool round_bf16) const override;
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
  bool fused_moe(ConstRowsView x,
                 const WeightView& gate,
                 const float* bias,
                 const RouteParams& params,
                 const MoeExpertViews& experts,
                 float swiglu_limit,
                 ConstRowsView shared,
                 RowsView out,
                 int32_t* experts_out,
                 float* weights_out) const override;
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
  void softmax_pool(const float* const* kv,
                    const float* const* score,
                    int64_t groups,
                    int group,
                    int64_t dim,
                    float* out) const override;

 private:
  struct Record {
    std::string op, what;
    size_t bytes = 0;
    bool pending = false;  // the backend computes it (take_checksums)
    uint64_t value = 0;
  };
  TracingOps(std::unique_ptr<Ops> inner, std::FILE* file) : inner_(std::move(inner)), file_(file) {}
  // Bytes of `count` floats / int32s (0 for a negative count).
  static size_t float_bytes(int64_t count) { return sizeof(float) * nonnegative(count); }
  static size_t int_bytes(int64_t count) { return sizeof(int32_t) * nonnegative(count); }
  static size_t nonnegative(int64_t count) { return static_cast<size_t>(count > 0 ? count : 0); }
  // Records backend memory written by op `op`; `what` names the output.
  void backend_bytes(const char* op, std::string what, const void* data, size_t bytes) const;
  // Records host memory an op wrote (valid once the op returns: such ops wait).
  void host_bytes(const char* op, std::string what, const void* data, size_t bytes) const;
  void rows(const char* op, const char* what, ConstRowsView v) const;
  Status flush_locked() const;

  std::unique_ptr<Ops> inner_;
  std::FILE* file_;
  mutable std::mutex mu_;
  mutable std::vector<Record> records_;  // not yet written
  mutable int64_t written_ = 0;          // records written so far
  mutable int64_t pending_ = 0;          // records in records_ the backend computes
  mutable Status error_;                 // the first failure to write
};

}  // namespace di::backend
