// deepinfer bench kernels
// [--quick|--wgmma|--small-ops|--latency-ops|--latency-once|--mix-pipe|--mix-rows|--decode|
// --profile|--sparse-attention[-prefill]|--index-scores|--dense-tc|--sample-rows|--dense-f32] (also
// the standalone cuda_kernels_bench): times DeepInfer's CUDA kernels at DeepSeek-V4.1-Flash widths
// (hidden 5120, 64 heads x 512, expert intermediate 2304) against floors measured in the same run:
// device copy bandwidth (cudaMemcpy D2D, bytes read + written) and cuBLASLt's bf16 and fp8 GEMM
// rate at 8192^3. Each kernel's floor is max(bytes / bandwidth, FLOPs / peak); ratio = floor /
// time. Weights and keys rotate through copies larger than L2 so that timings read HBM. Then the
// decode table (decode_bench.cc); --decode runs only that, --wgmma only the prefill GEMM table
// (wgmma_bench.cc),
// --profile one launch for ncu.
#include "cuda/kernels_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_grouped.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "cuda/decode_bench.h"
#include "cuda/dense_f32_bench.h"
#include "cuda/dense_tc_bench.h"
#include "cuda/index_scores_bench.h"
#include "cuda/sample_bench.h"
#include "cuda/small_ops_bench.h"
#include "cuda/sparse_attention_bench.h"
#include "cuda/wgmma_bench.h"

namespace di::bench {
namespace {

using backend::cuda::DeviceWeight;

constexpr size_t kRotateBytes = size_t{256} << 20;  // > 4x the H200's 60 MB L2

struct Timer {
  cudaEvent_t a = nullptr, b = nullptr;
  Timer() {
    (void)cudaEventCreate(&a);
    (void)cudaEventCreate(&b);
  }
  ~Timer() {
    (void)cudaEventDestroy(a);
    (void)cudaEventDestroy(b);
  }
};

// Mean ms of `fn(i)` over iters calls after 3 warm-ups; fn returns a launch error.
template <class F>
Expected<double> time_ms(int iters, F&& fn) {
  for (int i = 0; i < 3; ++i) DI_CUDA_RETURN_IF_ERROR(fn(i));
  Timer t;
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(t.a));
  for (int i = 0; i < iters; ++i) DI_CUDA_RETURN_IF_ERROR(fn(i));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(t.b));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(t.b));
  float ms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, t.a, t.b));
  return static_cast<double>(ms) / iters;
}

struct Peaks {
  double bytes_per_s = 0, bf16_flops = 0, fp8_flops = 0;
};

Expected<Peaks> measure_peaks(int iters) {
  Peaks p;
  DeviceBuffers buf;
  const size_t n = size_t{1} << 30;
  DI_ASSIGN_OR_RETURN(uint8_t * a, buf.alloc<uint8_t>(n));
  DI_ASSIGN_OR_RETURN(uint8_t * b, buf.alloc<uint8_t>(n));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(a, 1, n));
  DI_ASSIGN_OR_RETURN(double copy_ms, time_ms(iters, [&](int) {
                        return cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
                      }));
  p.bytes_per_s = 2.0 * static_cast<double>(n) / (copy_ms * 1e-3);
  const int64_t s = 8192;
  DI_ASSIGN_OR_RETURN(double bf16_ms, time_cublaslt_gemm(LtType::kBF16, s, s, s, iters));
  DI_ASSIGN_OR_RETURN(double fp8_ms, time_cublaslt_gemm(LtType::kFP8, s, s, s, iters));
  p.bf16_flops = 2.0 * s * s * s / (bf16_ms * 1e-3);
  p.fp8_flops = 2.0 * s * s * s / (fp8_ms * 1e-3);
  return p;
}

void print_row(const std::string& name,
               double ms,
               double bytes,
               double flops,
               double peak_flops,
               const Peaks& p,
               const std::string& extra) {
  const double floor_ms = std::max(bytes / p.bytes_per_s, flops / peak_flops) * 1e3;
  std::printf("| %s | %.4f | %.4f | %.2f | %.0f | %.1f | %s |\n", name.c_str(), ms, floor_ms,
              floor_ms / ms, bytes / (ms * 1e-3) / 1e9, flops / (ms * 1e-3) / 1e12, extra.c_str());
}

// Our block-scaled GEMM (act_quant + GEMM, as CudaOps::linear runs it) at [rows, in] x [out, in].
Status bench_linear(
    WeightFormat f, int64_t rows, int64_t out, int64_t in, int iters, const Peaks& p) {
  DeviceBuffers buf;
  const size_t wbytes = static_cast<size_t>(f == WeightFormat::kFP8 ? out * in : out * in / 2);
  const size_t sbytes = static_cast<size_t>(f == WeightFormat::kFP8 ? ((out + 31) / 32) * (in / 32)
                                                                    : out * (in / 32));
  const int copies = static_cast<int>(std::max<size_t>(1, kRotateBytes / wbytes + 1));
  std::vector<DeviceWeight> ws;
  for (int c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(uint8_t * d, buf.upload(random_bytes(wbytes, 10 + c, false)));
    DI_ASSIGN_OR_RETURN(uint8_t * sc, buf.upload(random_bytes(sbytes, 20 + c, true)));
    ws.push_back({f, out, in, d, sc});
  }
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * in), 3)));
  DI_ASSIGN_OR_RETURN(float* q, buf.alloc<float>(static_cast<size_t>(rows * in)));
  DI_ASSIGN_OR_RETURN(float* s, buf.alloc<float>(static_cast<size_t>(rows * in / 32)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(rows * out)));
  DI_ASSIGN_OR_RETURN(uint8_t * qa, buf.alloc<uint8_t>(static_cast<size_t>(rows * in)));
  const int n_iters = rows >= 1024 ? std::max(2, iters / 10) : iters;
  DI_ASSIGN_OR_RETURN(double ms, time_ms(n_iters, [&](int i) {
                        cudaError_t e = backend::cuda::quantize_fp8(x, rows, in, q, s, nullptr);
                        if (e != cudaSuccess) return e;
                        return backend::cuda::block_scaled_gemm(q, s, rows, ws[i % copies], y,
                                                                nullptr);
                      }));
  // The act_quant kernel alone, to split the row's time between the two launches.
  DI_ASSIGN_OR_RETURN(double quant_ms, time_ms(n_iters, [&](int) {
                        return backend::cuda::quantize_fp8(x, rows, in, q, s, nullptr);
                      }));
  // Bytes a fused kernel must move: weights + scales, bf16 activations in, bf16 out.
  const double bytes = static_cast<double>(wbytes + sbytes) + 2.0 * rows * in + 2.0 * rows * out;
  const double flops = 2.0 * rows * out * in;
  char quant_note[48];
  std::snprintf(quant_note, sizeof quant_note, "; act_quant alone %.4f ms", quant_ms);
  std::string lt = "n/a";
  if (f == WeightFormat::kFP8) {
    auto lt_ms = time_cublaslt_gemm(LtType::kFP8, out, rows, in, n_iters);
    auto lt_bf16_ms = time_cublaslt_gemm(LtType::kBF16, out, rows, in, n_iters);
    if (lt_ms && lt_bf16_ms) {
      char b[96];
      std::snprintf(b, sizeof b, "%.4f (%.2f of floor); bf16 %.4f", *lt_ms,
                    std::max(bytes / p.bytes_per_s, flops / p.fp8_flops) * 1e3 / *lt_ms,
                    *lt_bf16_ms);
      lt = b;
    } else {
      lt = (lt_ms ? lt_bf16_ms.status() : lt_ms.status()).message();
    }
  }
  char name[96];
  std::snprintf(name, sizeof name, "linear %s exact M=%lld N=%lld K=%lld",
                f == WeightFormat::kFP8 ? "fp8" : "fp4", static_cast<long long>(rows),
                static_cast<long long>(out), static_cast<long long>(in));
  print_row(name, ms, bytes, flops, p.fp8_flops, p, lt + quant_note);
  if (f != WeightFormat::kFP8) return {};
  // The tensor-core path as CudaOps::linear runs it: act_quant to e4m3 bytes, then the MMA GEMM;
  // and the GEMM kernel alone.
  DI_ASSIGN_OR_RETURN(
      double tc_ms, time_ms(n_iters, [&](int i) {
        cudaError_t e = backend::cuda::quantize_fp8_e4m3(x, rows, in, qa, s, nullptr);
        if (e != cudaSuccess) return e;
        return backend::cuda::block_scaled_gemm_tc(qa, s, rows, ws[i % copies], y, nullptr);
      }));
  DI_ASSIGN_OR_RETURN(double tc_gemm_ms, time_ms(n_iters, [&](int i) {
                        return backend::cuda::block_scaled_gemm_tc(qa, s, rows, ws[i % copies], y,
                                                                   nullptr);
                      }));
  const double floor_ms = std::max(bytes / p.bytes_per_s, flops / p.fp8_flops) * 1e3;
  char tc_note[96];
  std::snprintf(tc_note, sizeof tc_note, "GEMM kernel alone %.4f ms (%.2f of floor); variants",
                tc_gemm_ms, floor_ms / tc_gemm_ms);
  // Every tile configuration's GEMM alone (the same bits; the launcher picks one by M).
  std::string variants = tc_note;
  for (int v = 0; v < backend::cuda::kTensorGemmVariants; ++v) {
    DI_ASSIGN_OR_RETURN(double v_ms, time_ms(n_iters, [&](int i) {
                          return backend::cuda::block_scaled_gemm_tc_variant(
                              v, qa, s, rows, ws[i % copies], y, nullptr);
                        }));
    char b[32];
    std::snprintf(b, sizeof b, " %d:%.4f", v, v_ms);
    variants += b;
  }
  // The fused decode kernel (act_quant inside: the whole linear in one launch) for few rows.
  if (backend::cuda::tensor_decode_fits(rows, in)) {
    variants += "; fused decode";
    for (int v = 0; v < backend::cuda::kTensorDecodeVariants; ++v) {
      DI_ASSIGN_OR_RETURN(double v_ms, time_ms(n_iters, [&](int i) {
                            return backend::cuda::block_scaled_gemm_tc_decode(
                                v, x, rows, ws[i % copies], y, nullptr);
                          }));
      char b[48];
      std::snprintf(b, sizeof b, " %d:%.4f (%.2f)", v, v_ms, floor_ms / v_ms);
      variants += b;
    }
  }
  std::snprintf(name, sizeof name, "linear fp8 tensor M=%lld N=%lld K=%lld",
                static_cast<long long>(rows), static_cast<long long>(out),
                static_cast<long long>(in));
  print_row(name, tc_ms, bytes, flops, p.fp8_flops, p, variants);
  return {};
}

// Sparse attention at V4.1 decode: 64 heads x 512, window 128 + top-k 512 keys per query.
Status bench_attention(int64_t queries, int iters, const Peaks& p) {
  DeviceBuffers buf;
  const int heads = 64, dim = 512;
  const int64_t keys = 128 + 512;
  const int64_t table_rows = std::max<int64_t>(keys * queries, kRotateBytes / (dim * 4));
  DI_ASSIGN_OR_RETURN(float* kv,
                      buf.upload(random_floats(static_cast<size_t>(table_rows * dim), 4)));
  DI_ASSIGN_OR_RETURN(float* q,
                      buf.upload(random_floats(static_cast<size_t>(queries * heads * dim), 5)));
  DI_ASSIGN_OR_RETURN(float* sink, buf.upload(random_floats(heads, 6)));
  DI_ASSIGN_OR_RETURN(float* out, buf.alloc<float>(static_cast<size_t>(queries * heads * dim)));
  const int copies = static_cast<int>(table_rows / (keys * queries));
  std::vector<int32_t*> index;
  for (int c = 0; c < copies; ++c) {
    std::vector<int32_t> idx(static_cast<size_t>(queries * keys));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(c * keys * queries + i);
    DI_ASSIGN_OR_RETURN(int32_t * d, buf.upload(idx));
    index.push_back(d);
  }
  DI_ASSIGN_OR_RETURN(double ms, time_ms(iters, [&](int i) {
                        return backend::cuda::sparse_attention(q, queries, heads, dim, kv,
                                                               index[i % copies], keys, sink,
                                                               0.044f, out, nullptr);
                      }));
  // Floor bytes: each query's keys once (as the fp32 rows this kernel reads; the FP8 cache of the
  // design would be 4x smaller), q in and out as bf16.
  const double bytes = 4.0 * queries * keys * dim + 2.0 * 2 * queries * heads * dim;
  const double flops = 2.0 * 2 * queries * heads * keys * dim;
  char name[96];
  std::snprintf(name, sizeof name, "sparse_attention q=%lld h=64 d=512 keys=640",
                static_cast<long long>(queries));
  print_row(name, ms, bytes, flops, p.bf16_flops, p, "-");
  return {};
}

Status run(bool quick, bool wgmma_only) {
  cudaDeviceProp prop{};
  DI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  const int iters = quick ? 5 : 20;
  DI_ASSIGN_OR_RETURN(Peaks p, measure_peaks(iters));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::printf(
      "measured: copy %.0f GB/s (read+write), cuBLASLt bf16 %.0f TFLOP/s, fp8 %.0f TFLOP/s "
      "(8192^3)\n\n",
      p.bytes_per_s / 1e9, p.bf16_flops / 1e12, p.fp8_flops / 1e12);
  if (wgmma_only) return bench_wgmma_gemms(p.fp8_flops, p.bytes_per_s, quick);
  std::printf(
      "| kernel | ms | floor ms | floor/time | GB/s | TFLOP/s | cuBLASLt fp8 ms (per-tensor "
      "scale); notes "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t m : {1, 8, 16, 64, 512, 4096}) {
    DI_RETURN_IF_ERROR(bench_linear(WeightFormat::kFP8, m, 5120, 5120, iters, p));
  }
  for (int64_t m : {1, 64})
    DI_RETURN_IF_ERROR(bench_linear(WeightFormat::kFP4, m, 2304, 5120, iters, p));
  for (int64_t q : {1, 64}) DI_RETURN_IF_ERROR(bench_attention(q, iters, p));
  return bench_wgmma_gemms(p.fp8_flops, p.bytes_per_s, quick);
}

}  // namespace
}  // namespace di::bench

int di::bench::run_kernels_bench(int argc, char** argv) {
  bool quick = false, decode_only = false, profile = false, attention = false,
       attention_profile = false, wgmma_only = false, index_scores = false, small_ops = false,
       dense_tc = false, sample = false, dense_f32 = false, latency_ops = false, mix_pipe = false,
       mix_rows = false, latency_once = false, attention_prefill = false;
  // 1: the routed-experts table alone; 2: the same without the variant sweep; 3: one graph of the
  // tensor path at 4,096 tokens and 16 experts (for a profiler); 4: the many-rows table alone;
  // 5: decode sizes (1-8 tokens at 16 and 384 experts); 6: one graph at one token and 16
  // experts (for a profiler); 7: decode sizes, the single-group variants side by side;
  // moe_variant: the variant of mode 6's graph (-1: the pick)
  int moe = 0, moe_variant = -1;
  // 1: the batch-1 step's FP8 products on every few-row variant; 2: one launch each, for ncu
  int few_rows = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--wgmma") {
      wgmma_only = true;
    } else if (a == "--small-ops") {
      small_ops = true;
    } else if (a == "--latency-ops") {
      latency_ops = true;
    } else if (a == "--latency-once") {
      latency_once = true;
    } else if (a == "--mix-pipe") {
      mix_pipe = true;
    } else if (a == "--mix-rows") {
      mix_rows = true;
    } else if (a == "--decode") {
      decode_only = true;
    } else if (a == "--few-rows") {
      few_rows = 1;
    } else if (a == "--few-rows-profile") {
      few_rows = 2;
    } else if (a == "--moe") {
      moe = 1;
    } else if (a == "--moe-pick") {
      moe = 2;
    } else if (a == "--moe-profile") {
      moe = 3;
    } else if (a == "--moe-large") {
      moe = 4;
    } else if (a == "--moe-decode") {
      moe = 5;
    } else if (a == "--moe-decode-profile") {
      moe = 6;
    } else if (a.rfind("--moe-decode-profile=", 0) == 0) {
      moe = 6;
      const char* v = a.c_str() + std::strlen("--moe-decode-profile=");
      const char* end = a.c_str() + a.size();
      const auto [ptr, ec] = std::from_chars(v, end, moe_variant);
      if (ec != std::errc() || ptr != end || moe_variant < 0 ||
          moe_variant >= di::backend::cuda::kMoeTcVariants) {
        std::fprintf(stderr, "%s: --moe-decode-profile=V: V must be a variant 0..%d, not '%s'\n",
                     argv[0], di::backend::cuda::kMoeTcVariants - 1, v);
        return 2;
      }
    } else if (a == "--moe-decode-variants") {
      moe = 7;
    } else if (a == "--profile") {
      profile = true;
    } else if (a == "--sparse-attention") {
      attention = true;
    } else if (a == "--sparse-attention-profile") {
      attention_profile = true;
    } else if (a == "--sparse-attention-prefill") {
      attention_prefill = true;
    } else if (a == "--index-scores") {
      index_scores = true;
    } else if (a == "--dense-tc") {
      dense_tc = true;
    } else if (a == "--sample-rows") {
      sample = true;
    } else if (a == "--dense-f32") {
      dense_f32 = true;
    } else {
      std::fprintf(
          stderr,
          "%s: unknown flag '%s' (expected --quick, --wgmma, --small-ops, --latency-ops, "
          "--latency-once, "
          "--mix-pipe, --mix-rows, "
          "--decode, --few-rows, --few-rows-profile, "
          "--moe, --moe-pick, --moe-profile, --moe-large, --moe-decode, --moe-decode-profile[=V], "
          "--moe-decode-variants, "
          "--profile, --sparse-attention, "
          "--sparse-attention-profile, --sparse-attention-prefill, "
          "--index-scores, --dense-tc, --sample-rows or --dense-f32)\n",
          argv[0], a.c_str());
      return 2;
    }
  }
  if (attention || attention_profile || attention_prefill) {
    return di::bench::sparse_attention_bench(attention_profile ? di::bench::AttentionBench::kProfile
                                             : attention_prefill
                                                 ? di::bench::AttentionBench::kSequencePrefill
                                                 : di::bench::AttentionBench::kAll);
  }
  if (index_scores) return di::bench::index_scores_bench();
  if (dense_tc) return di::bench::dense_tc_bench();
  if (dense_f32) return di::bench::dense_f32_bench();
  di::Status s;
  if (few_rows > 0) {
    s = di::bench::run_few_rows_bench(few_rows == 2);
  } else if (small_ops) {
    s = di::bench::run_small_ops_bench();
  } else if (latency_ops || latency_once) {
    s = di::bench::run_latency_ops_bench(latency_once);
  } else if (mix_pipe) {
    s = di::bench::run_mix_pipe_bench();
  } else if (mix_rows) {
    s = di::bench::run_mix_rows_bench();
  } else if (sample) {
    s = di::bench::run_sample_bench();
  } else if (moe > 0) {
    s = di::bench::run_moe_bench(moe, moe_variant);
  } else {
    s = decode_only || profile ? di::Status() : di::bench::run(quick, wgmma_only);
    if (s.ok() && !wgmma_only)
      s = profile ? di::bench::run_profile_launches() : di::bench::run_decode_bench(quick);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], s.to_string().c_str());
    return 1;
  }
  return 0;
}
