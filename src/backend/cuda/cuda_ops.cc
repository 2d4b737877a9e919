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

  // Runs one op's staging and kernels, waits for the stream, releases the scratch, and latches
  // the first error.
  template <class F>
  void run(const char* op, F&& body) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error.ok()) return;
    const size_t mark = arena->scratch_mark();
    Status s = body();
    if (s.ok()) s = cuda::cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    arena->scratch_reset(mark);
    if (!s.ok()) error = s.with_context(std::string("cuda ") + op);
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
  return std::unique_ptr<CudaOps>(new CudaOps(std::move(impl)));
}

CudaOps::CudaOps(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaOps::~CudaOps() = default;

Status CudaOps::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

void CudaOps::linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const {
  Impl& m = *impl_;
  m.run("linear", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const float* dx, m.upload(x.data, static_cast<size_t>(x.rows * x.cols)));
    DI_ASSIGN_OR_RETURN(float* dy, m.scratch<float>(static_cast<size_t>(y.rows * y.cols)));
    DI_RETURN_IF_ERROR(m.linear(dx, x.rows, x.cols, w, dy, round_bf16));
    return m.download(y.data, dy, static_cast<size_t>(y.rows * y.cols));
  });
}

void CudaOps::rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const {
  Impl& m = *impl_;
  m.run("rms_norm", [&]() -> Status {
    const size_t n = static_cast<size_t>(x.rows * x.cols);
    DI_ASSIGN_OR_RETURN(const float* dx, m.upload(x.data, n));
    DI_ASSIGN_OR_RETURN(const float* dw, m.upload(w, static_cast<size_t>(x.cols)));
    DI_ASSIGN_OR_RETURN(float* dy, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::rms_norm(dx, x.rows, x.cols, dw, eps, dy, m.stream));
    return m.download(y.data, dy, n);
  });
}

void CudaOps::fake_quant_fp8(RowsView x, int block) const {
  Impl& m = *impl_;
  m.run("fake_quant_fp8", [&]() -> Status {
    const size_t n = static_cast<size_t>(x.rows * x.cols);
    DI_ASSIGN_OR_RETURN(float* dx, m.upload(x.data, n));
    DI_CUDA_RETURN_IF_ERROR(cuda::fake_quant_fp8(dx, x.rows, x.cols, block, m.stream));
    return m.download(x.data, dx, n);
  });
}

void CudaOps::fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const {
  Impl& m = *impl_;
  m.run("fake_quant_fp4", [&]() -> Status {
    const size_t n = static_cast<size_t>(x.rows * x.cols);
    DI_ASSIGN_OR_RETURN(float* dx, m.upload(x.data, n));
    DI_CUDA_RETURN_IF_ERROR(cuda::fake_quant_fp4(dx, x.rows, x.cols, kind, m.stream));
    return m.download(x.data, dx, n);
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
    const size_t n = static_cast<size_t>(x.rows * x.cols);
    DI_ASSIGN_OR_RETURN(float* dx, m.upload(x.data, n));
    DI_ASSIGN_OR_RETURN(const int64_t* dp, m.upload(positions, static_cast<size_t>(x.rows)));
    DI_ASSIGN_OR_RETURN(const float* df, m.upload(table.inv_freq.data(), table.inv_freq.size()));
    DI_CUDA_RETURN_IF_ERROR(cuda::rope(dx, x.rows, x.cols, num_heads, head_dim, rope_offset, dp, df,
                                       static_cast<int>(table.inv_freq.size()), inverse, m.stream));
    return m.download(x.data, dx, n);
  });
}

void CudaOps::sparse_attention(const SparseAttentionArgs& a) const {
  Impl& m = *impl_;
  m.run("sparse_attention", [&]() -> Status {
    // Host key pointers become indices into one gathered table of distinct rows.
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
    std::vector<float> table(rows.size() * static_cast<size_t>(a.head_dim));
    for (size_t r = 0; r < rows.size(); ++r) {
      std::memcpy(table.data() + r * a.head_dim, rows[r], sizeof(float) * a.head_dim);
    }
    const size_t qn = static_cast<size_t>(a.num_queries * a.num_heads * a.head_dim);
    DI_ASSIGN_OR_RETURN(const float* dq, m.upload(a.q, qn));
    DI_ASSIGN_OR_RETURN(const float* dkv, m.upload(table.data(), table.size()));
    DI_ASSIGN_OR_RETURN(const int32_t* di, m.upload(index.data(), index.size()));
    DI_ASSIGN_OR_RETURN(const float* ds, m.upload(a.sink, static_cast<size_t>(a.num_heads)));
    DI_ASSIGN_OR_RETURN(float* dout, m.scratch<float>(qn));
    DI_CUDA_RETURN_IF_ERROR(cuda::sparse_attention(dq, a.num_queries, a.num_heads, a.head_dim, dkv,
                                                   di, a.num_keys, ds, a.softmax_scale, dout,
                                                   m.stream));
    return m.download(a.out, dout, qn);
  });
}

void CudaOps::index_scores(const IndexScoreArgs& a) const {
  Impl& m = *impl_;
  m.run("index_scores", [&]() -> Status {
    std::vector<float> keys(static_cast<size_t>(a.num_keys * a.head_dim));
    for (int64_t s = 0; s < a.num_keys; ++s) {
      std::memcpy(keys.data() + s * a.head_dim, a.keys[s], sizeof(float) * a.head_dim);
    }
    const size_t qn = static_cast<size_t>(a.num_queries * a.num_heads * a.head_dim);
    DI_ASSIGN_OR_RETURN(const float* dq, m.upload(a.q, qn));
    DI_ASSIGN_OR_RETURN(const float* dw,
                        m.upload(a.weights, static_cast<size_t>(a.num_queries * a.num_heads)));
    DI_ASSIGN_OR_RETURN(const float* dk, m.upload(keys.data(), keys.size()));
    DI_ASSIGN_OR_RETURN(const int64_t* dv,
                        m.upload(a.num_visible, static_cast<size_t>(a.num_queries)));
    const size_t sn = static_cast<size_t>(a.num_queries * a.num_keys);
    DI_ASSIGN_OR_RETURN(float* ds, m.scratch<float>(sn));
    DI_CUDA_RETURN_IF_ERROR(cuda::index_scores(dq, dw, a.num_queries, a.num_heads, a.head_dim, dk,
                                               a.num_keys, dv, ds, m.stream));
    return m.download(a.scores, ds, sn);
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
    DI_ASSIGN_OR_RETURN(const float* dx, m.upload(x.data, static_cast<size_t>(x.rows * x.cols)));
    DI_ASSIGN_OR_RETURN(float* raw, m.scratch<float>(static_cast<size_t>(x.rows * mix)));
    DI_RETURN_IF_ERROR(m.linear(dx, x.rows, x.cols, fn_w, raw, /*round=*/false));
    DI_ASSIGN_OR_RETURN(const float* dscale, m.upload(scale, 3));
    DI_ASSIGN_OR_RETURN(const float* dbase, m.upload(base, static_cast<size_t>(mix)));
    DI_ASSIGN_OR_RETURN(HcCoefficients * dout,
                        m.scratch<HcCoefficients>(static_cast<size_t>(x.rows)));
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_mixes(dx, x.rows, x.cols, raw, dscale, dbase, hc,
                                           sinkhorn_iters, hc_eps, norm_eps, dout, m.stream));
    return m.download(out, dout, static_cast<size_t>(x.rows));
  });
}

void CudaOps::hc_collapse(ConstRowsView x, const float* pre, int hc, RowsView y) const {
  Impl& m = *impl_;
  m.run("hc_collapse", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const float* dx, m.upload(x.data, static_cast<size_t>(x.rows * x.cols)));
    DI_ASSIGN_OR_RETURN(const float* dp, m.upload(pre, static_cast<size_t>(x.rows * hc)));
    const size_t n = static_cast<size_t>(y.rows * y.cols);
    DI_ASSIGN_OR_RETURN(float* dy, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_collapse(dx, dp, x.rows, hc, y.cols, dy, m.stream));
    return m.download(y.data, dy, n);
  });
}

void CudaOps::hc_expand(ConstRowsView y,
                        ConstRowsView residual,
                        const HcCoefficients* coeff,
                        int hc,
                        RowsView out) const {
  Impl& m = *impl_;
  m.run("hc_expand", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const float* dy, m.upload(y.data, static_cast<size_t>(y.rows * y.cols)));
    DI_ASSIGN_OR_RETURN(
        const float* dr,
        m.upload(residual.data, static_cast<size_t>(residual.rows * residual.cols)));
    DI_ASSIGN_OR_RETURN(const HcCoefficients* dc, m.upload(coeff, static_cast<size_t>(y.rows)));
    const size_t n = static_cast<size_t>(out.rows * out.cols);
    DI_ASSIGN_OR_RETURN(float* dout, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::hc_expand(dy, dr, dc, y.rows, hc, y.cols, dout, m.stream));
    return m.download(out.data, dout, n);
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
    DI_ASSIGN_OR_RETURN(const float* dx, m.upload(x.data, static_cast<size_t>(x.rows * x.cols)));
    DI_ASSIGN_OR_RETURN(float* raw,
                        m.scratch<float>(static_cast<size_t>(x.rows * params.num_experts)));
    DI_RETURN_IF_ERROR(m.linear(dx, x.rows, x.cols, gate, raw, /*round=*/false));
    const float* dbias = nullptr;
    if (bias) {
      DI_ASSIGN_OR_RETURN(dbias, m.upload(bias, static_cast<size_t>(params.num_experts)));
    }
    const size_t n = static_cast<size_t>(x.rows * params.topk);
    DI_ASSIGN_OR_RETURN(int32_t * de, m.scratch<int32_t>(n));
    DI_ASSIGN_OR_RETURN(float* dw, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::moe_route(raw, x.rows, dbias, params, de, dw, m.stream));
    DI_RETURN_IF_ERROR(m.download(experts, de, n));
    return m.download(weights, dw, n);
  });
}

void CudaOps::swiglu(ConstRowsView gate,
                     ConstRowsView up,
                     const float* row_weight,
                     float limit,
                     RowsView out) const {
  Impl& m = *impl_;
  m.run("swiglu", [&]() -> Status {
    const size_t n = static_cast<size_t>(gate.rows * gate.cols);
    DI_ASSIGN_OR_RETURN(const float* dg, m.upload(gate.data, n));
    DI_ASSIGN_OR_RETURN(const float* du, m.upload(up.data, n));
    const float* drw = nullptr;
    if (row_weight) {
      DI_ASSIGN_OR_RETURN(drw, m.upload(row_weight, static_cast<size_t>(gate.rows)));
    }
    DI_ASSIGN_OR_RETURN(float* dout, m.scratch<float>(n));
    DI_CUDA_RETURN_IF_ERROR(cuda::swiglu(dg, du, gate.rows, gate.cols, drw, limit, dout, m.stream));
    return m.download(out.data, dout, n);
  });
}

void CudaOps::engram_gate(
    RowsView x, ConstRowsView kv, const float* qk_weight, int hc, float eps) const {
  Impl& m = *impl_;
  m.run("engram_gate", [&]() -> Status {
    const int64_t dim = x.cols / hc;
    const size_t n = static_cast<size_t>(x.rows * x.cols);
    DI_ASSIGN_OR_RETURN(float* dx, m.upload(x.data, n));
    DI_ASSIGN_OR_RETURN(const float* dkv,
                        m.upload(kv.data, static_cast<size_t>(kv.rows * kv.cols)));
    DI_ASSIGN_OR_RETURN(const float* dw, m.upload(qk_weight, static_cast<size_t>(hc * dim)));
    // dim**-0.5 is a Python float in the reference, rounded to fp32 where it meets a tensor.
    const float inv_sqrt_dim = static_cast<float>(std::pow(static_cast<double>(dim), -0.5));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::engram_gate(dx, dkv, dw, x.rows, hc, dim, eps, inv_sqrt_dim, m.stream));
    return m.download(x.data, dx, n);
  });
}

void CudaOps::softmax_pool(
    const float* kv, const float* score, int group, int64_t dim, float* out) const {
  Impl& m = *impl_;
  m.run("softmax_pool", [&]() -> Status {
    const size_t n = static_cast<size_t>(group * dim);
    DI_ASSIGN_OR_RETURN(const float* dkv, m.upload(kv, n));
    DI_ASSIGN_OR_RETURN(const float* ds, m.upload(score, n));
    DI_ASSIGN_OR_RETURN(float* dout, m.scratch<float>(static_cast<size_t>(dim)));
    DI_CUDA_RETURN_IF_ERROR(cuda::softmax_pool(dkv, ds, group, dim, dout, m.stream));
    return m.download(out, dout, static_cast<size_t>(dim));
  });
}

}  // namespace di::backend
