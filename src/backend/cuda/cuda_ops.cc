#include "backend/cuda/cuda_ops.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/kernels.h"

namespace di::backend {

namespace {

// Rows up to which `linear` takes the weight-streaming skinny GEMM (docs/benchmarks.md, session
// 4): on the exact path it beat the previous decode kernel at every measured shape up to 64 rows;
// the tensor-core path (about 37 us at 5120 x 5120 for 1-16 rows) is faster from 4 rows on.
constexpr int64_t kSkinnyRowsExact = 64;

size_t weight_data_bytes(const WeightView& w) {
  const int64_t n = w.out_features * w.in_features;
  switch (w.format) {
    case WeightFormat::kFP8:
      return static_cast<size_t>(n);
    case WeightFormat::kFP4:
      return static_cast<size_t>(n / 2);
    case WeightFormat::kBF16:
      return static_cast<size_t>(n) * 2;
    case WeightFormat::kF32:
      return static_cast<size_t>(n) * 4;
  }
  return 0;
}

size_t weight_scale_bytes(const WeightView& w) {
  if (w.format == WeightFormat::kFP8) {
    return static_cast<size_t>(((w.out_features + 31) / 32) * ((w.in_features + 31) / 32));
  }
  if (w.format == WeightFormat::kFP4)
    return static_cast<size_t>(w.out_features * (w.in_features / 32));
  return 0;
}

// A cheap fingerprint of a weight's bytes, so that a cached upload is not reused when a caller
// (a test, say) frees a weight and a new one lands at the same address.
uint64_t fingerprint(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  auto mix = [&](size_t i) { h = (h ^ p[i]) * 1099511628211ull; };
  for (size_t i = 0; i < std::min<size_t>(n, 256); ++i) mix(i);
  for (size_t i = n > 256 ? n - 256 : 0; i < n; ++i) mix(i);
  for (size_t i = 0; i < 64 && n > 0; ++i) mix((i * 0x9E3779B97F4A7C15ull) % n);
  return h;
}

struct CachedWeight {
  uint64_t print = 0;
  cuda::DeviceWeight dev;
};

}  // namespace

struct CudaOps::Impl {
  std::mutex mu;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceArena> arena;
  std::unordered_map<const uint8_t*, CachedWeight> weights;
  CudaGemm gemm = CudaGemm::kExact;
  Status error;
  uint64_t host_syncs = 0;

  ~Impl() {
    if (stream) (void)cudaStreamDestroy(stream);
  }

  template <class T>
  Expected<T*> scratch(size_t count) {
    DI_ASSIGN_OR_RETURN(void* p, arena->alloc_scratch(sizeof(T) * std::max<size_t>(count, 1)));
    return static_cast<T*>(p);
  }
  template <class T>
  Expected<T*> upload(const T* host, size_t count) {
    DI_ASSIGN_OR_RETURN(T * d, scratch<T>(count));
    if (count > 0) {
      DI_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d, host, sizeof(T) * count, cudaMemcpyHostToDevice, stream));
    }
    return d;
  }
  template <class T>
  Status download(T* host, const T* dev, size_t count) {
    if (count == 0) return {};
    DI_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, dev, sizeof(T) * count, cudaMemcpyDeviceToHost, stream));
    return {};
  }

  Expected<cuda::DeviceWeight> weight(const WeightView& w) {
    const size_t data_bytes = weight_data_bytes(w), scale_bytes = weight_scale_bytes(w);
    const uint64_t print = fingerprint(w.data, data_bytes) ^
                           (scale_bytes ? fingerprint(w.scale, scale_bytes) : 0) ^
                           (static_cast<uint64_t>(w.out_features) << 20) ^
                           static_cast<uint64_t>(w.in_features) ^ static_cast<uint64_t>(w.format);
    auto it = weights.find(w.data);
    if (it != weights.end() && it->second.print == print) return it->second.dev;
    cuda::DeviceWeight d{w.format, w.out_features, w.in_features, nullptr, nullptr};
    DI_ASSIGN_OR_RETURN(void* data, arena->alloc_persistent(data_bytes));
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(data, w.data, data_bytes, cudaMemcpyHostToDevice));
    d.data = static_cast<const uint8_t*>(data);
    if (scale_bytes) {
      DI_ASSIGN_OR_RETURN(void* scale, arena->alloc_persistent(scale_bytes));
      DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(scale, w.scale, scale_bytes, cudaMemcpyHostToDevice));
      d.scale = static_cast<const uint8_t*>(scale);
    }
    weights[w.data] = {print, d};
    return d;
  }

  // y = x . w on device buffers (x [rows, cols], y [rows, w.out_features]), enqueued only.
  Status linear(
      const float* dx, int64_t rows, int64_t cols, const WeightView& w, float* dy, bool round) {
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dw, weight(w));
    if (w.format != WeightFormat::kFP8 && w.format != WeightFormat::kFP4) {
      DI_CUDA_RETURN_IF_ERROR(cuda::dense_gemm(dx, rows, dw, dy, round, stream));
      return {};
    }
    const size_t in = static_cast<size_t>(rows * cols);
    DI_ASSIGN_OR_RETURN(float* sc, scratch<float>(in / 32));
    // (The fused decode kernel, gemm_tc_decode.cu, measured slower than these two launches at
    // one row; it is not used here, see docs/notes/cuda-kernels.md.) On the tensor path one kernel
    // family serves every M of a weight, so a row's bits never depend on its batch: the bf16 wgmma
    // kernel on sm_90 (K % 128 == 0), else the mma.sync one. The exact path and FP4 weights take
    // the weight-streaming skinny kernel for few rows: it is bitwise equal to the tiled one.
    const bool exact = gemm == CudaGemm::kExact || w.format == WeightFormat::kFP4;
    const bool skinny = exact && rows <= kSkinnyRowsExact && cuda::skinny_gemm_supports(rows, dw);
    if (gemm == CudaGemm::kTensor && cuda::wgmma_bf16_applies(dw)) {  // sm_90, K % 128 == 0
      DI_ASSIGN_OR_RETURN(uint16_t * xb, scratch<uint16_t>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8_bf16(dx, rows, cols, xb, stream));
      DI_CUDA_RETURN_IF_ERROR(cuda::block_scaled_gemm_wgmma_bf16(xb, rows, dw, dy, stream));
    } else if (!exact) {
      DI_ASSIGN_OR_RETURN(uint8_t * qa, scratch<uint8_t>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8_e4m3(dx, rows, cols, qa, sc, stream));
      DI_CUDA_RETURN_IF_ERROR(gemm == CudaGemm::kWgmma
                                  ? cuda::block_scaled_gemm_wg(qa, sc, rows, dw, dy, stream)
                                  : cuda::block_scaled_gemm_tc(qa, sc, rows, dw, dy, stream));
    } else {
      DI_ASSIGN_OR_RETURN(float* q, scratch<float>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8(dx, rows, cols, q, sc, stream));
      DI_CUDA_RETURN_IF_ERROR(skinny ? cuda::skinny_gemm(q, sc, rows, dw, dy, stream)
                                     : cuda::block_scaled_gemm(q, sc, rows, dw, dy, stream));
    }
    return {};
  }

  // A per-layer constant given as a host pointer (norm weights, sinks, biases, RoPE
  // frequencies): uploaded once and cached by address like the weights.
  Expected<const float*> constant(const float* host, int64_t count) {
    const WeightView w{WeightFormat::kF32, 1, count, reinterpret_cast<const uint8_t*>(host),
                       nullptr};
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight d, weight(w));
    return reinterpret_cast<const float*>(d.data);
  }

  // Enqueues one op (its metadata uploads and kernels; activations are already on the device),
  // releases its scratch, and latches the first error. No wait: the scratch is reused only by
  // later work on the same stream, and pageable uploads are staged before cudaMemcpyAsync
  // returns.
  template <class F>
  void run(const char* op, F&& body) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error.ok()) return;
    const size_t mark = arena->scratch_mark();
    Status s = body();
    arena->scratch_reset(mark);
    if (!s.ok()) error = s.with_context(std::string("cuda ") + op);
  }
  // Waits for the stream (a download); counted for the benchmark.
  Status sync() {
    ++host_syncs;
    return cuda::cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
};

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
  if (options.gemm == CudaGemm::kWgmma) {
    cudaDeviceProp prop{};
    DI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
    if (prop.major != 9 || prop.minor != 0) {
      return Status(StatusCode::kUnavailable,
                    "the wgmma GEMM path needs an sm_90 device; use --cuda-gemm tensor");
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
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
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

// --- backend memory: device memory from the stream-ordered pool ---

float* CudaOps::allocate(int64_t count) const {
  Impl& m = *impl_;
  float* p = nullptr;
  m.run("allocate", [&]() -> Status {
    void* raw = nullptr;
    DI_CUDA_RETURN_IF_ERROR(cudaMallocAsync(
        &raw, sizeof(float) * static_cast<size_t>(std::max<int64_t>(count, 1)), m.stream));
    p = static_cast<float*>(raw);
    return {};
  });
  return p;
}

void CudaOps::deallocate(float* p) const {
  if (!p) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  (void)cudaFreeAsync(p, impl_->stream);
}

void CudaOps::upload(const float* host, float* dst, int64_t count) const {
  Impl& m = *impl_;
  m.run("upload", [&]() -> Status {
    if (count <= 0 || !dst) return {};
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, sizeof(float) * static_cast<size_t>(count),
                                            cudaMemcpyHostToDevice, m.stream));
    return {};
  });
}

void CudaOps::download(const float* src, float* host, int64_t count) const {
  Impl& m = *impl_;
  m.run("download", [&]() -> Status {
    if (count <= 0) return {};
    if (!src) return Status(StatusCode::kInternal, "download from a null buffer");
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, src, sizeof(float) * static_cast<size_t>(count),
                                            cudaMemcpyDeviceToHost, m.stream));
    return m.sync();
  });
}

void CudaOps::copy_2d(const float* src,
                      int64_t src_stride,
                      float* dst,
                      int64_t dst_stride,
                      int64_t width,
                      int64_t rows) const {
  Impl& m = *impl_;
  m.run("copy_2d", [&]() -> Status {
    if (width <= 0 || rows <= 0) return {};
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        dst, sizeof(float) * static_cast<size_t>(dst_stride), src,
        sizeof(float) * static_cast<size_t>(src_stride), sizeof(float) * static_cast<size_t>(width),
        static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, m.stream));
    return {};
  });
}

void CudaOps::fill(float* dst, float value, int64_t count) const {
  if (value != 0.0f || std::signbit(value)) {
    Ops::fill(dst, value, count);
    return;
  }
  Impl& m = *impl_;
  m.run("fill", [&]() -> Status {
    if (count <= 0 || !dst) return {};
    DI_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(dst, 0, sizeof(float) * static_cast<size_t>(count), m.stream));
    return {};
  });
}

void CudaOps::gather_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const {
  Impl& m = *impl_;
  m.run("gather_rows", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const int64_t* dr, m.upload(rows, static_cast<size_t>(dst.rows)));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::gather_rows(src.data, src.cols, dr, dst.rows, dst.data, m.stream));
    return {};
  });
}

// --- ops: activations are device pointers; weights and per-layer constants are cached uploads;
// metadata (positions, visible counts, key pointer tables, row weights) is uploaded per call ---

void CudaOps::linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const {
  Impl& m = *impl_;
  m.run("linear",
        [&]() -> Status { return m.linear(x.data, x.rows, x.cols, w, y.data, round_bf16); });
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
    DI_ASSIGN_OR_RETURN(const float* const* dptrs,
                        m.upload(a.keys, static_cast<size_t>(a.num_keys)));
    DI_ASSIGN_OR_RETURN(float* dk, m.scratch<float>(static_cast<size_t>(a.num_keys * a.head_dim)));
    DI_CUDA_RETURN_IF_ERROR(cuda::gather_pointed_rows(dptrs, a.num_keys, a.head_dim, dk, m.stream));
    DI_ASSIGN_OR_RETURN(const int64_t* dv,
                        m.upload(a.num_visible, static_cast<size_t>(a.num_queries)));
    DI_CUDA_RETURN_IF_ERROR(cuda::index_scores(a.q, a.weights, a.num_queries, a.num_heads,
                                               a.head_dim, dk, a.num_keys, dv, a.scores, m.stream));
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
    DI_RETURN_IF_ERROR(m.linear(x.data, x.rows, x.cols, fn_w, raw, /*round=*/false));
    DI_ASSIGN_OR_RETURN(const float* dscale, m.constant(scale, 3));
    DI_ASSIGN_OR_RETURN(const float* dbase, m.constant(base, mix));
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_mixes(x.data, x.rows, x.cols, raw, dscale, dbase, hc,
                                           sinkhorn_iters, hc_eps, norm_eps, out, m.stream));
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

void CudaOps::softmax_pool(
    const float* kv, const float* score, int group, int64_t dim, float* out) const {
  Impl& m = *impl_;
  m.run("softmax_pool", [&]() -> Status {
    DI_CUDA_RETURN_IF_ERROR(cuda::softmax_pool(kv, score, group, dim, out, m.stream));
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

}  // namespace di::backend
