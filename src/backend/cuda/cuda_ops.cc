#include "backend/cuda/cuda_ops.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/hc_mix_rows.h"
#include "backend/cuda/kernels.h"

namespace di::backend {

Expected<std::unique_ptr<CudaOps>> CudaOps::create(ThreadPool& /*pool*/,
                                                   const CudaOptions& options) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    // No driver or no GPU (e.g. CI): say so plainly, with CUDA's reason.
    return Status(
        StatusCode::kUnavailable,
        "no usable CUDA device (" + cuda::cuda_status(e, "cudaGetDeviceCount").message() + ")");
  }
  if (count <= options.device) {
    return Status(StatusCode::kUnavailable, "no CUDA device " + std::to_string(options.device));
  }
  DI_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  if (options.gemm == CudaGemm::kFp8) {
    cudaDeviceProp prop{};
    DI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
    if (prop.major != 9 || prop.minor != 0) {
      return Status(StatusCode::kUnavailable,
                    "--cuda-gemm fp8 needs an sm_90 (Hopper) device: its FP8 wgmma "
                    "kernels exist only for sm_90a; use --cuda-gemm tensor");
    }
  }
  if (options.gemm == CudaGemm::kTensor) {
    cudaDeviceProp prop{};
    DI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
    if (prop.major * 10 + prop.minor < 89) {
      return Status(StatusCode::kUnavailable,
                    "the tensor GEMM path needs e4m3 MMA (sm_89+); use the exact path");
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->gemm = options.gemm;
  impl->graphs = options.graphs;
  if (options.profile_ops) impl->profiler = std::make_unique<cuda::OpProfiler>();
  if (options.time_idle) {
    impl->idle.emplace();
    for (cudaEvent_t* e : {&impl->idle->end[0], &impl->idle->end[1], &impl->idle->begin}) {
      DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(e));
    }
  }
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->main_stream, cudaStreamNonBlocking));
  impl->stream = impl->main_stream;
  impl->side_enabled = options.side_lines;
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->side_stream, cudaStreamNonBlocking));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&impl->fork_event, cudaEventDisableTiming));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&impl->join_event, cudaEventDisableTiming));
  void* pinned = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&pinned, Impl::kPinnedBytes, cudaHostAllocDefault));
  impl->pinned = static_cast<uint8_t*>(pinned);
  // Small uploads read the ring from kernels where the device maps it (always under unified
  // addressing); otherwise they stay copy-engine transfers.
  void* pinned_device = nullptr;
  if (cudaHostGetDevicePointer(&pinned_device, pinned, 0) == cudaSuccess) {
    impl->pinned_device = static_cast<uint8_t*>(pinned_device);
  } else {
    (void)cudaGetLastError();
  }
  DI_ASSIGN_OR_RETURN(impl->arena, cuda::DeviceArena::create(options.arena_bytes));
  // Activations come from the stream-ordered pool; keeping what it reserved makes allocation
  // inside a step a free-list operation, not a cudaMalloc.
  cudaMemPool_t mem_pool = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&mem_pool, options.device));
  uint64_t keep = UINT64_MAX;
  DI_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(mem_pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return std::unique_ptr<CudaOps>(new CudaOps(std::move(impl)));
}

CudaOps::CudaOps(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaOps::~CudaOps() = default;

Status CudaOps::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

uint64_t CudaOps::host_syncs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->host_syncs;
}

double CudaOps::host_wait_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->host_wait_seconds;
}

double CudaOps::device_idle_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->idle ? impl_->idle->seconds : 0.0;
}

std::vector<OpTime> CudaOps::take_op_profile() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->profiler) return {};
  auto t = impl_->profiler->take(impl_->stream);
  if (!t) {
    if (impl_->error.ok()) impl_->error = t.status().with_context("cuda op profile");
    return {};
  }
  return std::move(*t);
}

// --- ops: activations are device pointers; weights and per-layer constants are cached uploads;
// metadata (positions, visible counts, key pointer tables, row weights) is uploaded per call ---

void CudaOps::linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const {
  Impl& m = *impl_;
  // Named by weight format, so that an op profile tells the decode GEMV families apart.
  const char* name = w.format == WeightFormat::kFP8    ? "linear_fp8"
                     : w.format == WeightFormat::kFP4  ? "linear_fp4"
                     : w.format == WeightFormat::kBF16 ? "linear_bf16"
                                                       : "linear_f32";
  m.run(
      name, [&]() -> Status { return m.linear(x.data, x.rows, x.cols, w, y.data, round_bf16); },
      &w);
}

void CudaOps::linear_pair(ConstRowsView x,
                          const WeightView& w0,
                          RowsView y0,
                          const WeightView& w1,
                          RowsView y1,
                          bool round_bf16) const {
  Impl& m = *impl_;
  if (!m.pair_on_decode_kernel(x.rows, w0, w1)) {
    linear(x, w0, y0, round_bf16);
    linear(x, w1, y1, round_bf16);
    return;
  }
  m.run(
      "linear_pair_fp8",
      [&]() -> Status { return m.linear_pair(x.data, x.rows, x.cols, w0, y0.data, w1, y1.data); },
      &w0);
}

void CudaOps::grouped_linear(
    ConstRowsView x, const WeightView& w, int groups, RowsView y, bool round_bf16) const {
  Impl& m = *impl_;
  // Every group in one launch: together the groups' outputs fill the device.
  m.run(
      "grouped_linear",
      [&]() -> Status {
        if (w.format != WeightFormat::kBF16 && w.format != WeightFormat::kF32) {
          return Status(StatusCode::kInvalidArgument, "grouped_linear: BF16 or F32 weights only");
        }
        if (groups < 1 || x.cols != groups * w.in_features || y.cols != w.out_features ||
            w.out_features % groups != 0) {
          return Status(StatusCode::kInvalidArgument, "grouped_linear: shapes do not match");
        }
        DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dw, m.weight(w));
        if (m.gemm != CudaGemm::kExact && cuda::dense_bf16_tc_supports(dw, groups)) {
          // The tensor and fp8 paths: bf16 MMAs for every M (dense_bf16_tc.cu); x is bf16 in the
          // reference (the attention output), so the conversion is exact.
          return m.dense_bf16_tensor(x.data, x.rows, x.cols, dw, groups, y.data, round_bf16);
        }
        // Like `linear`: a thread per output only when there are enough outputs to keep bytes in
        // flight, the register-tiled GEMM for many rows, else eight threads per output.
        const bool gemv = cuda::dense_gemv_applies(x.rows, dw) && dw.out_features >= 16384 &&
                          reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
        if (gemv) {
          DI_CUDA_RETURN_IF_ERROR(
              cuda::dense_gemv(x.data, x.rows, dw, groups, y.data, round_bf16, m.stream));
        } else if (cuda::dense_tiled_applies(x.rows, dw, groups)) {
          DI_CUDA_RETURN_IF_ERROR(
              cuda::dense_tiled(x.data, x.rows, dw, groups, y.data, round_bf16, m.stream));
        } else {
          DI_CUDA_RETURN_IF_ERROR(
              cuda::dense_gemm_grouped(x.data, x.rows, dw, groups, y.data, round_bf16, m.stream));
        }
        return {};
      },
      &w);
}

void CudaOps::rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const {
  Impl& m = *impl_;
  m.run("rms_norm", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const float* dw, m.constant(w, x.cols));
    DI_CUDA_RETURN_IF_ERROR(cuda::rms_norm(x.data, x.rows, x.cols, dw, eps, y.data, m.stream));
    return {};
  });
}

void CudaOps::fake_quant_fp8(RowsView x, int block) const {
  Impl& m = *impl_;
  m.run("fake_quant_fp8", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(cuda::fake_quant_fp8(x.data, x.rows, x.cols, block, m.stream));
    return {};
  });
}

void CudaOps::fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const {
  Impl& m = *impl_;
  m.run("fake_quant_fp4", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(cuda::fake_quant_fp4(x.data, x.rows, x.cols, kind, m.stream));
    return {};
  });
}

void CudaOps::rope(RowsView x,
                   int num_heads,
                   int head_dim,
                   int rope_offset,
                   const int64_t* positions,
                   const RopeTable& table,
                   bool inverse) const {
  Impl& m = *impl_;
  m.run("rope", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const int64_t* dp, m.upload(positions, static_cast<size_t>(x.rows)));
    DI_ASSIGN_OR_RETURN(const float* df, m.constant(table.inv_freq.data(),
                                                    static_cast<int64_t>(table.inv_freq.size())));
    DI_CUDA_RETURN_IF_ERROR(cuda::rope(x.data, x.rows, x.cols, num_heads, head_dim, rope_offset, dp,
                                       df, static_cast<int>(table.inv_freq.size()), inverse,
                                       m.stream));
    return {};
  });
}

void CudaOps::sparse_attention(const SparseAttentionArgs& a) const {
  Impl& m = *impl_;
  m.run("sparse_attention", [&]() -> Status {
    // The key pointers (device rows of the pool and of this step) become indices into one
    // gathered table of distinct rows; only pointer values are read on the host.
    std::unordered_map<const float*, int32_t> row_of;
    std::vector<const float*> rows;
    const size_t slots = static_cast<size_t>(a.num_queries * a.num_keys);
    std::vector<int32_t> index(slots);
    for (size_t i = 0; i < slots; ++i) {
      const float* k = a.keys[i];
      if (!k) {
        index[i] = -1;
        continue;
      }
      auto [it, fresh] = row_of.emplace(k, static_cast<int32_t>(rows.size()));
      if (fresh) rows.push_back(k);
      index[i] = it->second;
    }
    DI_ASSIGN_OR_RETURN(const float* const* dptrs, m.upload(rows.data(), rows.size()));
    DI_ASSIGN_OR_RETURN(float* dkv,
                        m.scratch<float>(rows.size() * static_cast<size_t>(a.head_dim)));
    DI_CUDA_RETURN_IF_ERROR(cuda::gather_pointed_rows(dptrs, static_cast<int64_t>(rows.size()),
                                                      a.head_dim, dkv, m.stream));
    DI_ASSIGN_OR_RETURN(const int32_t* di, m.upload(index.data(), index.size()));
    DI_ASSIGN_OR_RETURN(const float* ds, m.constant(a.sink, a.num_heads));
    DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention(a.q, a.num_queries, a.num_heads, a.head_dim, dkv,
                                                   di, a.num_keys, ds, a.softmax_scale, a.out,
                                                   m.stream));
    return {};
  });
}

void CudaOps::index_scores(const IndexScoreArgs& a) const {
  Impl& m = *impl_;
  m.run("index_scores", [&]() -> Status {
    if (a.num_queries == 0 || a.num_keys == 0) return {};
    if (a.entries_per_page <= 0) {
      return Status(StatusCode::kInvalidArgument, "index_scores: entries_per_page must be > 0");
    }
    // Page tables and visible counts are host metadata: one upload each, no key gather.
    cuda::PagedKeys keys;
    keys.pool = a.key_pool;
    keys.per = a.entries_per_page;
    if (a.num_pages > 0) {
      DI_ASSIGN_OR_RETURN(keys.pages, m.upload(a.pages, static_cast<size_t>(a.num_pages)));
    }
    DI_ASSIGN_OR_RETURN(keys.page_offset,
                        m.upload(a.page_offset, static_cast<size_t>(a.num_queries)));
    DI_ASSIGN_OR_RETURN(const int64_t* dv,
                        m.upload(a.num_visible, static_cast<size_t>(a.num_queries)));
    DI_CUDA_RETURN_IF_ERROR(cuda::index_scores(a.q, a.weights, a.num_queries, a.num_heads,
                                               a.head_dim, keys, a.num_keys, dv, a.scores,
                                               m.stream));
    return {};
  });
}

void CudaOps::hc_mixes(ConstRowsView x,
                       const float* fn,
                       const float* scale,
                       const float* base,
                       int hc,
                       int sinkhorn_iters,
                       float hc_eps,
                       float norm_eps,
                       HcCoefficients* out) const {
  Impl& m = *impl_;
  m.run("hc_mixes", [&]() -> Status {
    if (hc < 1 || hc > HcCoefficients::kMaxHc) {
      return Status(StatusCode::kInvalidArgument, "hc out of range: " + std::to_string(hc));
    }
    const int mix = (2 + hc) * hc;
    // fn [(2+hc)*hc, hc*dim] is a per-layer constant: as an F32 weight it is uploaded once and
    // cached like the others, and its product is dense_gemm's (the CPU's dot_f32 order).
    const WeightView fn_w{WeightFormat::kF32, mix, x.cols, reinterpret_cast<const uint8_t*>(fn),
                          nullptr};
    DI_ASSIGN_OR_RETURN(float* raw, m.scratch<float>(static_cast<size_t>(x.rows * mix)));
    // Few rows: hc_mix_products (a block per output and row); many: hc_mix_rows (a block per two
    // rows, every chain of them; 4.7x a tiled product at 256 rows); else the dense product, the
    // sums of squares still by lane.
    const bool fit = cuda::hc_mix_products_fit(x.cols) && x.rows <= 65535;
    DI_ASSIGN_OR_RETURN(float* ss, m.scratch<float>(static_cast<size_t>(x.rows)));
    float* sum_squares = fit ? ss : nullptr;
    if (x.rows > 64 && cuda::hc_mix_rows_supports(mix)) {
      DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dfn, m.weight(fn_w));
      sum_squares = ss;
      DI_CUDA_RETURN_IF_ERROR(cuda::hc_mix_rows(x.data, x.rows, x.cols,
                                                reinterpret_cast<const float*>(dfn.data), mix, raw,
                                                sum_squares, /*round_out=*/false, m.stream));
    } else if (x.rows <= 64 && fit) {
      DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dfn, m.weight(fn_w));
      DI_CUDA_RETURN_IF_ERROR(cuda::hc_mix_products(x.data, x.rows, x.cols,
                                                    reinterpret_cast<const float*>(dfn.data), mix,
                                                    raw, sum_squares, m.stream));
    } else {
      DI_RETURN_IF_ERROR(m.linear(x.data, x.rows, x.cols, fn_w, raw, /*round=*/false));
      if (fit)
        DI_CUDA_RETURN_IF_ERROR(
            cuda::hc_sum_squares(x.data, x.rows, x.cols, sum_squares, m.stream));
    }
    DI_ASSIGN_OR_RETURN(const float* dscale, m.constant(scale, 3));
    DI_ASSIGN_OR_RETURN(const float* dbase, m.constant(base, mix));
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_mixes(x.data, x.rows, x.cols, sum_squares, raw, dscale, dbase,
                                           hc, sinkhorn_iters, hc_eps, norm_eps, out, m.stream));
    return {};
  });
}

void CudaOps::hc_collapse(ConstRowsView x, const float* pre, int hc, RowsView y) const {
  Impl& m = *impl_;
  m.run("hc_collapse", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_collapse(x.data, pre, x.rows, hc, y.cols, y.data, m.stream));
    return {};
  });
}

void CudaOps::hc_expand(ConstRowsView y,
                        ConstRowsView residual,
                        const HcCoefficients* coeff,
                        int hc,
                        RowsView out) const {
  Impl& m = *impl_;
  m.run("hc_expand", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(
        cuda::hc_expand(y.data, residual.data, coeff, y.rows, hc, y.cols, out.data, m.stream));
    return {};
  });
}

void CudaOps::moe_route(ConstRowsView x,
                        const WeightView& gate,
                        const float* bias,
                        const RouteParams& params,
                        int32_t* experts,
                        float* weights) const {
  Impl& m = *impl_;
  m.run("moe_route", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(float* raw,
                        m.scratch<float>(static_cast<size_t>(x.rows * params.num_experts)));
    DI_RETURN_IF_ERROR(m.linear(x.data, x.rows, x.cols, gate, raw, /*round=*/false));
    const float* dbias = nullptr;
    if (bias) {
      DI_ASSIGN_OR_RETURN(dbias, m.constant(bias, params.num_experts));
    }
    const size_t n = static_cast<size_t>(x.rows * params.topk);
    DI_ASSIGN_OR_RETURN(int32_t * de, m.scratch<int32_t>(n));
    DI_ASSIGN_OR_RETURN(float* dw, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::moe_route(raw, x.rows, dbias, params, de, dw, m.stream));
    // The routing decision is host metadata (the expert loop runs on the host): one wait.
    DI_RETURN_IF_ERROR(m.download(experts, de, n));
    DI_RETURN_IF_ERROR(m.download(weights, dw, n));
    return m.sync();
  });
}

void CudaOps::swiglu(ConstRowsView gate,
                     ConstRowsView up,
                     const float* row_weight,
                     float limit,
                     RowsView out) const {
  Impl& m = *impl_;
  m.run("swiglu", [&]() -> Status {
    const float* drw = nullptr;
    if (row_weight) {
      DI_ASSIGN_OR_RETURN(drw, m.upload(row_weight, static_cast<size_t>(gate.rows)));
    }
    DI_CUDA_RETURN_IF_ERROR(
        cuda::swiglu(gate.data, up.data, gate.rows, gate.cols, drw, limit, out.data, m.stream));
    return {};
  });
}

void CudaOps::engram_gate(
    RowsView x, ConstRowsView kv, const float* qk_weight, int hc, float eps) const {
  Impl& m = *impl_;
  m.run("engram_gate", [&]() -> Status {
    const int64_t dim = x.cols / hc;
    DI_ASSIGN_OR_RETURN(const float* dw, m.constant(qk_weight, hc * dim));
    // dim**-0.5 is a Python float in the reference, rounded to fp32 where it meets a tensor.
    const float inv_sqrt_dim = static_cast<float>(std::pow(static_cast<double>(dim), -0.5));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::engram_gate(x.data, kv.data, dw, x.rows, hc, dim, eps, inv_sqrt_dim, m.stream));
    return {};
  });
}

void CudaOps::softmax_pool(const float* const* kv,
                           const float* const* score,
                           int64_t groups,
                           int group,
                           int64_t dim,
                           float* out) const {
  Impl& m = *impl_;
  m.run("softmax_pool", [&]() -> Status {
    constexpr int64_t kChunk = 65535;  // grid.y
    for (int64_t g0 = 0; g0 < groups; g0 += kChunk) {
      const int64_t n = std::min(kChunk, groups - g0);
      DI_ASSIGN_OR_RETURN(const float* const* dk, m.upload(kv + g0, static_cast<size_t>(n)));
      DI_ASSIGN_OR_RETURN(const float* const* ds, m.upload(score + g0, static_cast<size_t>(n)));
      DI_CUDA_RETURN_IF_ERROR(cuda::softmax_pool(dk, ds, n, group, dim, out + g0 * dim, m.stream));
    }
    return {};
  });
}

void CudaOps::add_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const {
  Impl& m = *impl_;
  m.run("add_rows", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const int64_t* dr, m.upload(rows, static_cast<size_t>(src.rows)));
    DI_CUDA_RETURN_IF_ERROR(cuda::add_rows(src.data, src.cols, dr, src.rows, dst.data, m.stream));
    return {};
  });
}

void CudaOps::add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const {
  Impl& m = *impl_;
  m.run("add_round_bf16", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(
        cuda::add_round_bf16(a.data, b.data, a.rows * a.cols, out.data, m.stream));
    return {};
  });
}

void CudaOps::scale_round_bf16(RowsView x, float scale) const {
  Impl& m = *impl_;
  m.run("scale_round_bf16", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(cuda::scale_round_bf16(x.data, x.rows * x.cols, scale, m.stream));
    return {};
  });
}

}  // namespace di::backend
