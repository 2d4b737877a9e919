// The decode step's small row kernels (rms_norm, the mHC mixes, dense_staged, the KV writers and
// fake quantizers) at 1, 8 and 64 rows against their byte floor (bytes / copy bandwidth measured
// here: a 1 GiB D2D cudaMemcpyAsync, read + write). Times are CUDA-graph replays of kLaunches
// launches (the launch gaps a captured decode step has), best of a few replays; weights rotate
// through > 4x the L2. Each row also prints a hash of the output bytes (FNV-1a after the same
// launches on fixed random inputs), so two builds' tables show whether a kernel change kept every
// output bit.
#include "cuda/small_ops_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/kv_format.h"
#include "cuda/bench_util.h"
#include "cuda/fp32_peak.h"

namespace di::bench {
namespace {

using backend::Fp4ScaleKind;
using backend::HcCoefficients;
using backend::KvFormat;
using backend::RouteParams;
using backend::ScoreFunc;
using backend::cuda::DeviceWeight;

constexpr size_t kRotateBytes = size_t{256} << 20;
constexpr int kLaunches = 20;

}  // namespace

// Microseconds per launch of a graph of `launches` calls fn(i), best of `reps` replays.
Expected<double> graph_us(int reps, const Launch& fn, int launches) {
  cudaStream_t s = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  // The inputs were uploaded by cudaMemcpy from pageable memory, which may return before its DMA
  // lands, and `s` does not wait for the legacy stream: without this sync an in-place kernel
  // (fake_quant) could quantize half-uploaded blocks and keep the damage.
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = fn(0, s);  // outside the capture: one-time attributes are set here
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; e == cudaSuccess && i < launches; ++i) e = fn(i, s);
  if (e == cudaSuccess) e = cudaStreamEndCapture(s, &g);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
  if (e == cudaSuccess) e = cudaEventCreate(&a);
  if (e == cudaSuccess) e = cudaEventCreate(&b);
  if (e == cudaSuccess) e = cudaGraphLaunch(ge, s);
  double best = 1e30;
  for (int r = 0; e == cudaSuccess && r < reps; ++r) {
    float ms = 0;
    e = cudaEventRecord(a, s);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, s);
    if (e == cudaSuccess) e = cudaEventRecord(b, s);
    if (e == cudaSuccess) e = cudaEventSynchronize(b);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
    best = std::min(best, 1e3 * ms / launches);
  }
  if (ge) (void)cudaGraphExecDestroy(ge);
  if (g) (void)cudaGraphDestroy(g);
  if (a) (void)cudaEventDestroy(a);
  if (b) (void)cudaEventDestroy(b);
  (void)cudaStreamDestroy(s);
  DI_CUDA_RETURN_IF_ERROR(e);
  return best;
}

// FNV-1a of `n` bytes at device address d.
Expected<uint64_t> device_hash(const void* d, size_t n) {
  std::vector<uint8_t> h(n);
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
  uint64_t x = 1469598103934665603ull;
  for (uint8_t c : h) x = (x ^ c) * 1099511628211ull;
  return x;
}

namespace {

Expected<double> copy_bytes_per_s() {
  DeviceBuffers buf;
  const size_t n = size_t{1} << 30;
  DI_ASSIGN_OR_RETURN(uint8_t * a, buf.alloc<uint8_t>(n));
  DI_ASSIGN_OR_RETURN(uint8_t * b, buf.alloc<uint8_t>(n));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(a, 1, n));
  DI_ASSIGN_OR_RETURN(double us, graph_us(3, [&](int, cudaStream_t s) {
                        return cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s);
                      }));
  return 2.0 * static_cast<double>(n) / (us * 1e-6);
}

Status row(const char* name,
           int64_t rows,
           double bytes,
           double bw,
           const Launch& fn,
           const void* out,
           size_t out_bytes) {
  DI_ASSIGN_OR_RETURN(double us, graph_us(5, fn, kLaunches));
  DI_CUDA_RETURN_IF_ERROR(fn(0, nullptr));
  DI_ASSIGN_OR_RETURN(uint64_t hash, device_hash(out, out_bytes));
  const double floor_us = bytes / bw * 1e6;
  std::printf("| %s | %lld | %.2f | %.3f | %.3f | %016llx |\n", name, static_cast<long long>(rows),
              us, floor_us, floor_us / us, static_cast<unsigned long long>(hash));
  return {};
}

// Rotating copies of a weight-like buffer, so each launch reads it from HBM.
Expected<std::vector<const void*>> rotated(DeviceBuffers& buf, size_t bytes, uint32_t seed) {
  const size_t copies = std::max<size_t>(1, kRotateBytes / bytes + 1);
  const auto host = random_floats((bytes + 3) / 4, seed);
  std::vector<const void*> v;
  for (size_t c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(float* d, buf.upload(host));
    v.push_back(d);
  }
  return v;
}

Status bench_rms_norm(int64_t rows, int64_t cols, double bw) {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * cols), 1)));
  DI_ASSIGN_OR_RETURN(float* w, buf.upload(random_floats(static_cast<size_t>(cols), 2)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(rows * cols)));
  char name[64];
  std::snprintf(name, sizeof name, "rms_norm cols=%lld", static_cast<long long>(cols));
  // Bytes: x in and y out as fp32 (their stored form), w once.
  const double bytes = 4.0 * (2.0 * rows * cols + cols);
  return row(
      name, rows, bytes, bw,
      [&](int, cudaStream_t s) { return backend::cuda::rms_norm(x, rows, cols, w, 1e-6f, y, s); },
      y, sizeof(float) * rows * cols);
}

// The mHC mixes at V4.1 (hc 4, dim 5120): the mix product (+ sums of squares), the tail, and
// both as CudaOps::hc_mixes runs them.
Status bench_hc_mixes(int64_t rows, double bw) {
  DeviceBuffers buf;
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t hc_dim = hc * 5120;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * hc_dim), 3)));
  DI_ASSIGN_OR_RETURN(auto fn, rotated(buf, sizeof(float) * mix * hc_dim, 4));
  auto small = random_floats(static_cast<size_t>(mix), 5);
  for (auto& v : small) v *= 0.1f;
  DI_ASSIGN_OR_RETURN(float* base, buf.upload(small));
  DI_ASSIGN_OR_RETURN(float* scale, buf.upload(std::vector<float>{0.5f, 0.25f, 0.125f}));
  DI_ASSIGN_OR_RETURN(float* raw, buf.alloc<float>(static_cast<size_t>(rows * mix)));
  DI_ASSIGN_OR_RETURN(float* ss, buf.alloc<float>(static_cast<size_t>(rows)));
  DI_ASSIGN_OR_RETURN(HcCoefficients * out, buf.alloc<HcCoefficients>(static_cast<size_t>(rows)));
  auto products = [&](int i, cudaStream_t s) {
    return backend::cuda::hc_mix_products(
        x, rows, hc_dim, static_cast<const float*>(fn[i % fn.size()]), mix, raw, ss, s);
  };
  auto tail = [&](int, cudaStream_t s) {
    return backend::cuda::hc_mixes(x, rows, hc_dim, ss, raw, scale, base, hc, 20, 1e-6f, 1e-6f, out,
                                   s);
  };
  const double bytes = 4.0 * (rows * hc_dim + static_cast<double>(mix) * hc_dim);
  DI_RETURN_IF_ERROR(row("hc_mix_products hc=4 dim=5120", rows, bytes, bw, products, raw,
                         sizeof(float) * rows * mix));
  DI_RETURN_IF_ERROR(
      row("hc_mixes tail", rows, 4.0 * rows * mix, bw, tail, out, sizeof(HcCoefficients) * rows));
  return row(
      "hc_mixes (product + tail)", rows, bytes, bw,
      [&](int i, cudaStream_t s) {
        const cudaError_t e = products(i, s);
        return e != cudaSuccess ? e : tail(i, s);
      },
      out, sizeof(HcCoefficients) * rows);
}

// dense_staged and dense_octets at the V4.1 shapes they serve: the compressor's wkv/wgate (5120 ->
// 512, bf16), the indexer's weights_proj (5120 -> 32), the router (5120 -> 16) and 512 -> 128.
// The same inputs for both kernels, so equal output hashes mean equal bits.
Status bench_dense_staged(int64_t rows, int64_t out, int64_t in, double bw, bool octets) {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * in), 6)));
  DI_ASSIGN_OR_RETURN(auto w, rotated(buf, 2 * static_cast<size_t>(out * in), 7));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(rows * out)));
  char name[64];
  std::snprintf(name, sizeof name, "%s bf16 %lld x %lld", octets ? "dense_octets" : "dense_staged",
                static_cast<long long>(out), static_cast<long long>(in));
  const double bytes = 2.0 * out * in + 4.0 * rows * (in + out);
  return row(
      name, rows, bytes, bw,
      [&](int i, cudaStream_t s) {
        const DeviceWeight dw{WeightFormat::kBF16, out, in,
                              static_cast<const uint8_t*>(w[i % w.size()]), nullptr};
        return octets ? backend::cuda::dense_octets(x, rows, dw, y, true, s)
                      : backend::cuda::dense_staged(x, rows, dw, y, true, s);
      },
      y, sizeof(float) * rows * out);
}

// The fake quantizers in place (the same launches in every build, so the hashes compare):
// FP8 with 32-blocks on the 512-wide KV rows, FP4 (ue8m0, 32-blocks) on the indexer's 4,096.
Status bench_fake_quant(int64_t rows, bool fp4, double bw) {
  DeviceBuffers buf;
  const int64_t cols = fp4 ? 4096 : 512;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * cols), 9)));
  return row(
      fp4 ? "fake_quant_fp4 ue8m0 cols=4096" : "fake_quant_fp8 block=32 cols=512", rows,
      8.0 * rows * cols, bw,
      [&](int, cudaStream_t s) {
        return fp4 ? backend::cuda::fake_quant_fp4(x, rows, cols, Fp4ScaleKind::kUe8m0Block32, s)
                   : backend::cuda::fake_quant_fp8(x, rows, cols, 32, s);
      },
      x, sizeof(float) * rows * cols);
}

// The KV writers at V4.1's head dim (512): FP8 (window rows) and FP4 (compressed rows).
Status bench_write_kv(int64_t rows, KvFormat f, double bw) {
  DeviceBuffers buf;
  const int dim = 512;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * dim), 8)));
  const int64_t stride = kv_row_stride(f, dim);
  DI_ASSIGN_OR_RETURN(uint8_t * pool, buf.alloc<uint8_t>(static_cast<size_t>(rows * stride)));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(pool, 0, static_cast<size_t>(rows * stride)));
  const double bytes = 4.0 * rows * dim + static_cast<double>(rows * stride);
  return row(
      f == KvFormat::kFp8 ? "write_kv fp8 dim=512" : "write_kv fp4 dim=512", rows, bytes, bw,
      [&](int, cudaStream_t s) {
        return backend::cuda::write_kv_rows(x, rows, dim, f, nullptr, pool, s);
      },
      pool, static_cast<size_t>(rows * stride));
}

// --latency-ops: the decode step's latency-bound row kernels next to their chain floor (the
// dependent fp32 adds of their dot_f32 lanes, `steps` per lane, times the add latency measured
// in this run; 0 where the kernel has no such chain: its time is all latency). With `once` (the
// --latency-once flag) each kernel is launched once, plainly, at one row, for a profiler
// (`ncu -k regex:rms_norm ...`: one profiled launch per kernel and width), and only the output
// hashes are printed.
struct LatencyRun {
  double add_ns = 0;
  bool once = false;
};

Status chain_row(const char* name,
                 int64_t rows,
                 int64_t steps,
                 const LatencyRun& run,
                 const Launch& fn,
                 const void* out,
                 size_t out_bytes) {
  if (run.once) {
    DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the uploads (see graph_us)
    DI_CUDA_RETURN_IF_ERROR(fn(0, nullptr));
    DI_ASSIGN_OR_RETURN(uint64_t hash, device_hash(out, out_bytes));
    std::printf("| %s | %lld | - | - | - | %016llx |\n", name, static_cast<long long>(rows),
                static_cast<unsigned long long>(hash));
    return {};
  }
  DI_ASSIGN_OR_RETURN(double us, graph_us(5, fn, kLaunches));
  DI_CUDA_RETURN_IF_ERROR(fn(0, nullptr));
  DI_ASSIGN_OR_RETURN(uint64_t hash, device_hash(out, out_bytes));
  const double floor_us = static_cast<double>(steps) * run.add_ns * 1e-3;
  std::printf("| %s | %lld | %.2f | %.2f | %.2f | %016llx |\n", name, static_cast<long long>(rows),
              us, floor_us, floor_us / us, static_cast<unsigned long long>(hash));
  return {};
}

Status latency_rms_norm(int64_t rows, int64_t cols, const LatencyRun& run) {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * cols), 1)));
  DI_ASSIGN_OR_RETURN(float* w, buf.upload(random_floats(static_cast<size_t>(cols), 2)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(rows * cols)));
  char name[64];
  std::snprintf(name, sizeof name, "rms_norm cols=%lld", static_cast<long long>(cols));
  return chain_row(
      name, rows, cols / 8, run,
      [&](int, cudaStream_t s) { return backend::cuda::rms_norm(x, rows, cols, w, 1e-6f, y, s); },
      y, sizeof(float) * rows * cols);
}

// V4.1's mHC shapes (hc 4, dim 5120): the mixes (product, tail), collapse, expand, and the
// Engram gate; the router's tail at 256 experts, top 8.
Status latency_hc(int64_t rows, const LatencyRun& run) {
  DeviceBuffers buf;
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t dim = 5120, hc_dim = hc * dim;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * hc_dim), 3)));
  DI_ASSIGN_OR_RETURN(float* fn, buf.upload(random_floats(static_cast<size_t>(mix * hc_dim), 4)));
  auto small = random_floats(static_cast<size_t>(mix), 5);
  for (auto& v : small) v *= 0.1f;
  DI_ASSIGN_OR_RETURN(float* base, buf.upload(small));
  DI_ASSIGN_OR_RETURN(float* scale, buf.upload(std::vector<float>{0.5f, 0.25f, 0.125f}));
  DI_ASSIGN_OR_RETURN(float* raw, buf.alloc<float>(static_cast<size_t>(rows * mix)));
  DI_ASSIGN_OR_RETURN(float* ss, buf.alloc<float>(static_cast<size_t>(rows)));
  DI_ASSIGN_OR_RETURN(HcCoefficients * co, buf.alloc<HcCoefficients>(static_cast<size_t>(rows)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(rows * hc_dim)));
  DI_ASSIGN_OR_RETURN(float* pre, buf.upload(random_floats(static_cast<size_t>(rows * hc), 6)));
  DI_ASSIGN_OR_RETURN(float* kv,
                      buf.upload(random_floats(static_cast<size_t>(rows * (hc + 1) * dim), 7)));
  DI_ASSIGN_OR_RETURN(float* qk, buf.upload(random_floats(static_cast<size_t>(hc_dim), 8)));
  namespace cu = backend::cuda;
  auto products = [&](int, cudaStream_t s) {
    return cu::hc_mix_products(x, rows, hc_dim, fn, mix, raw, ss, s);
  };
  auto tail = [&](int, cudaStream_t s) {
    return cu::hc_mixes(x, rows, hc_dim, ss, raw, scale, base, hc, 20, 1e-6f, 1e-6f, co, s);
  };
  DI_RETURN_IF_ERROR(chain_row("hc_mix_products hc=4 dim=5120", rows, hc_dim / 8, run, products,
                               raw, sizeof(float) * rows * mix));
  DI_RETURN_IF_ERROR(
      chain_row("hc_mixes tail", rows, 0, run, tail, co, sizeof(HcCoefficients) * rows));
  DI_RETURN_IF_ERROR(chain_row(
      "hc_collapse hc=4 dim=5120", rows, 0, run,
      [&](int, cudaStream_t s) { return cu::hc_collapse(x, pre, rows, hc, dim, y, s); }, y,
      sizeof(float) * rows * dim));
  DI_RETURN_IF_ERROR(chain_row(
      "hc_expand hc=4 dim=5120", rows, 0, run,
      [&](int, cudaStream_t s) { return cu::hc_expand(x, x, co, rows, hc, dim, y, s); }, y,
      sizeof(float) * rows * hc_dim));
  // In place: each launch gates the previous one's rows (the same sequence in every build, so
  // the hashes still compare).
  DI_RETURN_IF_ERROR(chain_row(
      "engram_gate hc=4 dim=5120", rows, dim / 8, run,
      [&](int, cudaStream_t s) {
        return cu::engram_gate(y, kv, qk, rows, hc, dim, 1e-6f, 0.01f, s);
      },
      y, sizeof(float) * rows * hc_dim));
  // RoPE of the 64 query heads (head 512, the last 64 dims rotated: 32 frequencies), in place as
  // the gate above.
  const int heads = 64, head_dim = 512, freqs = 32;
  DI_ASSIGN_OR_RETURN(float* q,
                      buf.upload(random_floats(static_cast<size_t>(rows * heads * head_dim), 11)));
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = 4000 + static_cast<int64_t>(i);
  DI_ASSIGN_OR_RETURN(int64_t * pos, buf.upload(positions));
  std::vector<float> inv_freq(freqs);
  for (int i = 0; i < freqs; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / (2 * freqs));
  DI_ASSIGN_OR_RETURN(float* freq, buf.upload(inv_freq));
  DI_RETURN_IF_ERROR(chain_row(
      "rope 64 heads x 32 freqs", rows, 0, run,
      [&](int, cudaStream_t s) {
        return cu::rope(q, rows, int64_t{heads} * head_dim, heads, head_dim, head_dim - 2 * freqs,
                        pos, freq, freqs, false, s);
      },
      q, sizeof(float) * rows * heads * head_dim));
  const RouteParams rp{256, 8, ScoreFunc::kSqrtSoftplus, 1.0f, true, 2.5f};
  DI_ASSIGN_OR_RETURN(float* graw, buf.upload(random_floats(static_cast<size_t>(rows * 256), 9)));
  DI_ASSIGN_OR_RETURN(float* bias, buf.upload(random_floats(256, 10)));
  DI_ASSIGN_OR_RETURN(int32_t * ex, buf.alloc<int32_t>(static_cast<size_t>(rows * 8)));
  DI_ASSIGN_OR_RETURN(float* wt, buf.alloc<float>(static_cast<size_t>(rows * 8)));
  return chain_row(
      "moe_route 256 experts top 8", rows, 0, run,
      [&](int, cudaStream_t s) { return cu::moe_route(graw, rows, bias, rp, ex, wt, s); }, wt,
      sizeof(float) * rows * 8);
}

}  // namespace

Status run_latency_ops_bench(bool once) {
  LatencyRun run;
  run.once = once;
  if (once) {
    std::printf("latency-bound row kernels, one plain launch each (for a profiler)\n\n");
  } else {
    DI_ASSIGN_OR_RETURN(run.add_ns, measure_dependent_fadd_ns());
    std::printf(
        "latency-bound row kernels: dependent fp32 add %.3f ns; us per launch (graph replay of "
        "%d, a graph of one launch costs about as much as the emptiest kernel); floor = chain "
        "steps x add latency\n\n",
        run.add_ns, kLaunches);
  }
  std::printf("| kernel | rows | us | chain floor us | floor/time | output hash |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int64_t rows : {1, 8, 64}) {
    if (once && rows != 1) break;
    for (int64_t cols : {5120, 1536, 1280, 512}) {
      DI_RETURN_IF_ERROR(latency_rms_norm(rows, cols, run));
    }
    DI_RETURN_IF_ERROR(latency_hc(rows, run));
  }
  return {};
}

Status run_small_ops_bench() {
  DI_ASSIGN_OR_RETURN(double bw, copy_bytes_per_s());
  std::printf("small row kernels: copy %.0f GB/s; us per launch (graph replay of %d)\n\n", bw / 1e9,
              kLaunches);
  std::printf("| kernel | rows | us | floor us | floor/time | output hash |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int64_t rows : {1, 8, 64}) {
    for (int64_t cols : {5120, 1536, 512}) DI_RETURN_IF_ERROR(bench_rms_norm(rows, cols, bw));
  }
  for (int64_t rows : {1, 8, 64}) DI_RETURN_IF_ERROR(bench_hc_mixes(rows, bw));
  const int64_t dense_shapes[][2] = {{512, 5120}, {32, 5120}, {16, 5120}, {128, 512}};
  for (int64_t rows : {1, 2, 8}) {
    for (const auto& shape : dense_shapes) {
      for (bool octets : {false, true})
        DI_RETURN_IF_ERROR(bench_dense_staged(rows, shape[0], shape[1], bw, octets));
    }
  }
  for (int64_t rows : {1, 8, 64}) {
    for (KvFormat f : {KvFormat::kFp8, KvFormat::kFp4})
      DI_RETURN_IF_ERROR(bench_write_kv(rows, f, bw));
    for (bool fp4 : {false, true}) DI_RETURN_IF_ERROR(bench_fake_quant(rows, fp4, bw));
  }
  return {};
}

}  // namespace di::bench
