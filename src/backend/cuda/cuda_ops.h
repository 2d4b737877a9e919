// The CUDA backend: every op of backend::Ops on one GPU, on one stream (plus a second one for
// side lines, Ops::begin_side). Backend memory
// (activations, state pools) is device memory from the stream-ordered pool, so consecutive ops
// chain on the device; the host waits only where the model downloads (the router's decision, the
// indexer's top-k, the compressor's carry, logits), counted by host_syncs(). Weights
// (WeightView) and per-layer constants are uploaded once into the arena and cached by address,
// as they are immutable for the life of a model (see docs/notes/cuda-kernels.md).
//
// Errors: the first failing CUDA call is latched in status(); later ops do nothing.
// One CudaOps serves one caller at a time (calls are serialized by a mutex).
#pragma once

#include <cstddef>
#include <memory>

#include "backend/ops.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace di::backend {

// How `linear` runs FP8-weight GEMMs (docs/notes/cuda-kernels.md, "Tensor cores and the bitwise
// contract"). kExact: CUDA cores in the CPU's 8-lane order, bitwise equal to the CPU backend.
// kTensor: one tensor-core product per 32-block (on sm_90 with K % 128 == 0 a bf16 wgmma kernel,
// else e4m3 mma.sync), within tolerance of the CPU and bitwise batch-invariant (needs sm_89+).
// kFp8 (`--cuda-gemm fp8`): Hopper FP8 wgmma (sm_90a) for every M, the CPU's per-32-block
// promotion in K order, falling back to the mma.sync kernels for weights it cannot take
// (K % 128 != 0); bitwise batch-invariant, faster than kTensor at prefill sizes, but its k32
// block sums carry the FP8 tensor core's truncating accumulation (relative error ~6e-4 vs the CPU,
// 30x kTensor's), so it is opt-in (docs/notes/cuda-kernels.md, pgemm3); every other product
// (BF16 heads, routed FP4 experts) runs as on kTensor.
enum class CudaGemm { kExact, kTensor, kFp8 };

struct CudaOptions {
  int device = 0;
  size_t arena_bytes = size_t{8} << 30;
  CudaGemm gemm = CudaGemm::kExact;
  bool profile_ops = false;  // events around every op (take_op_profile)
  bool time_idle = false;    // device_idle_seconds: two events per host wait
  bool graphs = true;        // segments (Ops::begin_segment) replayed as CUDA graphs
  bool side_lines = true;    // Ops::begin_side runs the side line on a second stream
};

class CudaOps final : public Ops {
 public:
  // Fails (no abort) when no device is present or the arena cannot be allocated. `pool` is not
  // used today (every op runs on the GPU); it stays so that callers need not change.
  static Expected<std::unique_ptr<CudaOps>> create(ThreadPool& pool, const CudaOptions& options);
  ~CudaOps() override;
  const char* name() const override { return "cuda"; }
  Status status() const override;
  // Host waits so far (downloads and the router's decision).
  uint64_t host_syncs() const override;
  double host_wait_seconds() const override;
  double device_idle_seconds() const override;
  std::vector<OpTime> take_op_profile() const override;
  // Op tracing: a checksum kernel on the current line per record (cuda_ops_memory.cc).
  bool record_checksum(const void* data, size_t bytes) const override;
  std::vector<uint64_t> take_checksums() const override;
  bool begin_segment(uint64_t key) const override;
  void end_segment() const override;
  SegmentStats segment_stats() const override;
  // Side lines on a second stream (cuda_ops_side.cc); none while profiling ops.
  bool begin_side() const override;
  void end_side() const override;
  void join_side() const override;
  int64_t side_lines() const override;

  float* allocate(int64_t count) const override;
  void deallocate(float* p) const override;
  void upload(const float* host, float* dst, int64_t count) const override;
  void download(const float* src, float* host, int64_t count) const override;
  uint64_t download_async(const float* src, float* host, int64_t count) const override;
  void wait_download(uint64_t ticket) const override;
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
  // Tensor cores at 64 heads x 512 (within tolerance of the CPU), else bitwise (cuda_ops_kv.cc).
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
  // FP4 experts with dim and inter multiples of 128 (moe_grouped.h); device-side routing, one
  // wait only when the decision is copied out.
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
  void add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const override;
  void scale_round_bf16(RowsView x, float scale) const override;

 private:
  struct Impl;
  explicit CudaOps(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace di::backend
