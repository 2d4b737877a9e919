// CudaOps::fused_moe: the routed MoE of one layer without leaving the device (router product and
// top-k, moe_grouped.h's routing plan, grouped FP4 expert GEMMs on CUDA or tensor cores by the
// GEMM path, and the combine with the shared expert), so a decode step spends no host wait on it
// unless the caller asks for the decision.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/moe_grouped.h"

namespace di::backend {

namespace {

bool all_fp4(std::span<const WeightView> ws, int64_t out, int64_t in) {
  for (const WeightView& w : ws) {
    if (w.format != WeightFormat::kFP4 || w.out_features != out || w.in_features != in || !w.data ||
        !w.scale) {
      return false;
    }
  }
  return true;
}

// Rows per moe_routed launch (bounds its scratch).
constexpr int64_t kMoeChunkTokens = 4096;

}  // namespace

bool CudaOps::fused_moe(ConstRowsView x,
                        const WeightView& gate,
                        const float* bias,
                        const RouteParams& params,
                        const MoeExpertViews& experts,
                        float swiglu_limit,
                        ConstRowsView shared,
                        RowsView out,
                        int32_t* experts_out,
                        float* weights_out) const {
  const int64_t n = params.num_experts;
  if (n < 1 || static_cast<int64_t>(experts.w1.size()) != n ||
      static_cast<int64_t>(experts.w3.size()) != n ||
      static_cast<int64_t>(experts.w2.size()) != n) {
    return false;
  }
  const int64_t dim = x.cols, inter = experts.w1[0].out_features;
  if (!all_fp4(experts.w1, inter, dim) || !all_fp4(experts.w3, inter, dim) ||
      !all_fp4(experts.w2, dim, inter)) {
    return false;
  }
  cuda::MoeRoutedArgs args;
  args.tokens = x.rows;
  args.dim = dim;
  args.inter = inter;
  args.topk = params.topk;
  args.num_experts = static_cast<int>(n);
  if (!cuda::moe_routed_supports(args)) return false;

  Impl& m = *impl_;
  // The tensor (and wgmma) GEMM paths run the experts on tensor cores (moe_grouped_tc.cu, within
  // tolerance of the CPU); the exact path keeps the CPU's bits.
  args.tensor_cores = m.gemm != CudaGemm::kExact;
  m.run("fused_moe", [&]() -> Status {
    // The experts' device pointers, as six device arrays (w1, w3, w2 data; then their scales).
    auto it = m.expert_tables.find(experts.w1[0].data);
    if (it == m.expert_tables.end()) {
      std::vector<const uint8_t*> table(static_cast<size_t>(6 * n));
      const std::span<const WeightView> mats[3] = {experts.w1, experts.w3, experts.w2};
      for (int k = 0; k < 3; ++k) {
        for (int64_t e = 0; e < n; ++e) {
          DI_ASSIGN_OR_RETURN(cuda::DeviceWeight d, m.weight(mats[k][static_cast<size_t>(e)]));
          table[static_cast<size_t>(k * n + e)] = d.data;
          table[static_cast<size_t>((3 + k) * n + e)] = d.scale;
        }
      }
      DI_ASSIGN_OR_RETURN(void* dt, m.arena->alloc_persistent(sizeof(void*) * table.size()));
      DI_RETURN_IF_ERROR(m.interrupt_capture());  // the copy below is not captured
      // Through the pinned staging ring, in order on the op stream: `table` goes with this scope.
      DI_RETURN_IF_ERROR(m.copy_in(dt, table.data(), sizeof(void*) * table.size()));
      it =
          m.expert_tables.emplace(experts.w1[0].data, static_cast<const uint8_t* const*>(dt)).first;
    }
    const uint8_t* const* t = it->second;
    args.w1 = {t, t + 3 * n};
    args.w3 = {t + n, t + 4 * n};
    args.w2 = {t + 2 * n, t + 5 * n};

    // The router on the device: gate product (fp32) and per-row top-k, as moe_route.
    DI_ASSIGN_OR_RETURN(float* raw, m.scratch<float>(static_cast<size_t>(x.rows * n)));
    DI_RETURN_IF_ERROR(m.linear(x.data, x.rows, x.cols, gate, raw, /*round=*/false));
    const float* dbias = nullptr;
    if (bias) {
      DI_ASSIGN_OR_RETURN(dbias, m.constant(bias, n));
    }
    const size_t picks = static_cast<size_t>(x.rows * params.topk);
    DI_ASSIGN_OR_RETURN(int32_t * de, m.scratch<int32_t>(picks));
    DI_ASSIGN_OR_RETURN(float* dw, m.scratch<float>(picks));
    DI_CUDA_RETURN_IF_ERROR(cuda::moe_route(raw, x.rows, dbias, params, de, dw, m.stream));

    // The routed experts in chunks of rows: a token's output does not depend on the others in
    // its call (moe_grouped.h), and the scratch stays bounded (one 16K-token prefill would need
    // 4 GB at once).
    const int64_t chunk = std::min<int64_t>(x.rows, kMoeChunkTokens);
    DI_ASSIGN_OR_RETURN(uint8_t * scratch,
                        m.scratch<uint8_t>(cuda::moe_routed_scratch_bytes(
                            chunk, params.topk, static_cast<int>(n), dim, inter)));
    args.swiglu_limit = swiglu_limit;
    // The shared expert on an open side line (Ops::fused_moe): the combine waits for it, so it ran
    // beside the router and the experts. The side line is joined from here on.
    if (m.on_side()) DI_RETURN_IF_ERROR(m.join_side());
    DI_ASSIGN_OR_RETURN(args.shared_ready, m.side_ready());
    for (int64_t r0 = 0; r0 < x.rows; r0 += chunk) {
      cuda::MoeRoutedArgs part = args;
      part.tokens = std::min(chunk, x.rows - r0);
      part.x = x.data + r0 * dim;
      part.experts = de + r0 * params.topk;
      part.weights = dw + r0 * params.topk;
      part.shared = shared.data ? shared.data + r0 * dim : nullptr;
      part.out = out.data + r0 * dim;
      DI_CUDA_RETURN_IF_ERROR(cuda::moe_routed(part, scratch, m.stream));
    }
    if (args.shared_ready) {  // also when no combine ran (no rows)
      DI_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(m.stream, args.shared_ready, 0));
      m.finish_join();
    }
    if (experts_out && weights_out) {
      DI_RETURN_IF_ERROR(m.download(experts_out, de, picks));
      DI_RETURN_IF_ERROR(m.download(weights_out, dw, picks));
      return m.sync();
    }
    return {};
  });
  return true;
}

}  // namespace di::backend
