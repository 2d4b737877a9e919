// `cuda_kernels_bench --sparse-attention`: the FP8/FP4 KV-cache attention kernel
// (backend/cuda/sparse_attention_fp8.h) at V4.1 shapes (64 heads x 512, 128 window keys in FP8,
// selected compressed keys in FP4), against floors measured in the same run: bytes / device copy
// bandwidth and FLOPs / cuBLASLt's bf16 rate at 8192^3. Bytes = each query's key rows as stored
// (528 B FP8, 288 B FP4) + q and out in bf16; FLOPs = 4 * 64 * 512 per query-key (QK^T and PV).
// The pools (~440 MB) are larger than L2 and every timed call uses fresh random rows, so keys
// come from HBM.
#include "cuda/sparse_attention_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sparse_attention_fp8.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"

namespace di::bench {
namespace {

using backend::cuda::cuda_status;
using backend::cuda::kAttnHeads;
using backend::cuda::kKvDim;
using backend::cuda::kKvFp4RowBytes;
using backend::cuda::kKvFp8RowBytes;
using backend::cuda::SparseAttentionFp8Args;

constexpr int64_t kPool8Rows = int64_t{256} << 10;  // 138 MB
constexpr int64_t kPool4Rows = int64_t{1} << 20;    // 302 MB
constexpr int kIndexSets = 8;                       // rotated so repeats do not hit L2

struct Rng {  // xorshift64: fast enough for half a gigabyte of random bytes
  uint64_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>(s >> 16);
  }
};

// Stored rows with valid codes: e4m3 without NaN, ue8m0 scales near 2^-6, e4m3 FP4 scales.
std::vector<uint8_t> random_pool(int64_t rows, bool fp8, uint64_t seed) {
  Rng rng{seed};
  const int row_bytes = fp8 ? kKvFp8RowBytes : kKvFp4RowBytes;
  std::vector<uint8_t> v(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* p = v.data() + r * row_bytes;
    for (int i = 0; i < row_bytes; ++i) {
      const uint32_t x = rng.next();
      if (fp8) {
        p[i] = i < 512 ? static_cast<uint8_t>((x & 0x7f) == 0x7f ? x & 0xbe : x & 0xff)
                       : static_cast<uint8_t>(118 + x % 6);
      } else {
        p[i] = i < 256 ? static_cast<uint8_t>(x) : static_cast<uint8_t>(0x20 + x % 16);
      }
    }
  }
  return v;
}

struct Peaks {
  double bytes_per_s = 0, bf16_flops = 0;
};

Expected<Peaks> measure_peaks() {
  Peaks p;
  const size_t n = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&a, n));
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&b, n));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(a, 1, n));
  cudaEvent_t e0, e1;
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  for (int i = 0; i < 2; ++i)
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i)
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
  float ms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
  p.bytes_per_s = 2.0 * static_cast<double>(n) * 10 / (ms * 1e-3);
  (void)cudaFree(a);
  (void)cudaFree(b);
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  const int64_t s = 8192;
  DI_ASSIGN_OR_RETURN(double bf16_ms, time_cublaslt_gemm(LtType::kBF16, s, s, s, 10));
  p.bf16_flops = 2.0 * s * s * s / (bf16_ms * 1e-3);
  return p;
}

}  // namespace

// The seesaw kernel's timeline of block 7's first queries (ablate bit 6), one line per event.
Status print_seesaw_timeline(SparseAttentionFp8Args seesaw) {
  DeviceBuffers buf;
  const int64_t T = seesaw.num_queries;
  DI_ASSIGN_OR_RETURN(uint64_t * tr, buf.upload(std::vector<uint64_t>(3 * 256, 0)));
  seesaw.wgmma = 3;
  seesaw.ablate = 64;
  seesaw.workspace = tr;
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::sparse_attention_fp8(seesaw, nullptr));
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  std::vector<uint64_t> h(3 * 256);
  DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(h.data(), tr, h.size() * 8, cudaMemcpyDeviceToHost));
  std::vector<std::array<uint64_t, 4>> ev;  // time, warpgroup, event, block
  for (int w = 0; w < 3; ++w) {
    for (int i = 0; i < 256 && h[w * 256 + i] != 0; ++i) {
      const uint64_t v = h[w * 256 + i];
      ev.push_back({v & 0xffffffffffffull, static_cast<uint64_t>(w), v >> 56, (v >> 48) & 0xff});
    }
  }
  std::sort(ev.begin(), ev.end());
  for (const auto& e : ev) {
    std::printf("trace T=%lld %8llu wg%llu ev%llu b%llu\n", static_cast<long long>(T),
                static_cast<unsigned long long>(e[0] - ev[0][0]),
                static_cast<unsigned long long>(e[1]), static_cast<unsigned long long>(e[2]),
                static_cast<unsigned long long>(e[3]));
  }
  return {};
}

namespace {

struct Case {
  int64_t queries;
  int win, extra;
  bool prefill;  // windows of consecutive positions (overlapping), else one sequence per query
};

// Mean ms per call over `iters` calls cycling through the index sets.
Expected<double> time_batch(std::vector<SparseAttentionFp8Args>& sets, int iters) {
  cudaEvent_t e0, e1;
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) {
    DI_CUDA_RETURN_IF_ERROR(
        backend::cuda::sparse_attention_fp8(sets[static_cast<size_t>(i) % sets.size()], nullptr));
  }
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
  float ms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return static_cast<double>(ms) / iters;
}

// Median of 5 batches after at least 30 ms of warm-up calls (the SM clock idles at 345 MHz and
// ramps up under load: short timings right after host work would time the ramp).
Expected<double> time_case(std::vector<SparseAttentionFp8Args>& sets,
                           int heads,
                           int iters,
                           int ablate = 0,
                           int split = 0,
                           int wgmma = 0,
                           int pv_tiles = 0) {
  for (auto& a : sets) {
    a.heads_per_block = heads;
    a.ablate = ablate;
    a.split = split;
    a.wgmma = wgmma;
    a.pv_tiles = pv_tiles;
  }
  double warm = 0;
  for (int i = 0; i < 500 && warm < 30.0; ++i) {
    DI_ASSIGN_OR_RETURN(double ms, time_batch(sets, iters));
    warm += ms * iters;
  }
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    DI_ASSIGN_OR_RETURN(double ms, time_batch(sets, iters));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

Status bench_case(const Case& c,
                  const uint8_t* kv,
                  const uint8_t* extra_kv,
                  const Peaks& pk,
                  int ablations_or_profile,  // 1: time stages left out; -1: profile calls
                  std::vector<std::string>& ablation_lines) {
  DeviceBuffers buf;
  Rng rng{static_cast<uint64_t>(c.queries * 7919 + c.extra)};
  const int64_t T = c.queries;
  std::vector<uint16_t> q(static_cast<size_t>(T * kAttnHeads * kKvDim));
  for (auto& x : q) x = static_cast<uint16_t>(0x3c00 + (rng.next() & 0x83ff));  // +-[2^-7, 2^-6)
  std::vector<float> sink(kAttnHeads);
  for (auto& s : sink) s = static_cast<float>(rng.next() % 100) / 50.0f - 1.0f;
  DI_ASSIGN_OR_RETURN(uint16_t * d_q, buf.upload(q));
  DI_ASSIGN_OR_RETURN(float* d_sink, buf.upload(sink));
  DI_ASSIGN_OR_RETURN(uint16_t * d_out, buf.upload(std::vector<uint16_t>(q.size(), 0)));
  // The split path's workspace (up to 256 queries, to time it past its automatic range).
  const size_t ws_bytes =
      T <= 256 ? backend::cuda::sparse_attention_fp8_workspace_bytes(T, c.win + c.extra) : 0;
  uint8_t* d_ws = nullptr;
  if (ws_bytes > 0) {
    DI_ASSIGN_OR_RETURN(d_ws, buf.alloc<uint8_t>(ws_bytes));
  }
  std::vector<SparseAttentionFp8Args> sets;
  for (int s = 0; s < kIndexSets; ++s) {
    std::vector<int32_t> win(static_cast<size_t>(T * c.win)),
        extra(static_cast<size_t>(T * c.extra));
    const int64_t base = rng.next() % (kPool8Rows - T - c.win);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t seq_base = rng.next() % (kPool8Rows - c.win);
      for (int i = 0; i < c.win; ++i) {  // a sequence's window: consecutive ring rows
        win[static_cast<size_t>(t * c.win + i)] =
            static_cast<int32_t>(c.prefill ? base + t + i : seq_base + i);
      }
      for (int i = 0; i < c.extra; ++i) {
        extra[static_cast<size_t>(t * c.extra + i)] = static_cast<int32_t>(rng.next() % kPool4Rows);
      }
    }
    SparseAttentionFp8Args a;
    a.q = d_q;
    a.num_queries = T;
    a.kv = kv;
    DI_ASSIGN_OR_RETURN(a.indices, buf.upload(win));
    a.num_indices = c.win;
    a.extra_kv = extra_kv;
    DI_ASSIGN_OR_RETURN(a.extra_indices, buf.upload(extra));
    a.num_extra = c.extra;
    a.sink = d_sink;
    a.softmax_scale = 0.044194173824159216f;  // 512^-0.5
    a.out = d_out;
    a.workspace = d_ws;
    a.workspace_bytes = ws_bytes;
    sets.push_back(a);
  }
  if (ablations_or_profile < 0) {  // profile: two plain calls, then two of the seesaw kernel
    for (int i = 0; i < 2; ++i)
      DI_CUDA_RETURN_IF_ERROR(backend::cuda::sparse_attention_fp8(sets[0], nullptr));
    SparseAttentionFp8Args seesaw = sets[0];
    seesaw.wgmma = 3;
    for (int i = 0; i < 2; ++i) (void)backend::cuda::sparse_attention_fp8(seesaw, nullptr);
    if (T >= 64) DI_RETURN_IF_ERROR(print_seesaw_timeline(seesaw));
    return cuda_status(cudaDeviceSynchronize(), "profile calls");
  }
  const bool ablations = ablations_or_profile > 0;
  const int iters = T >= 1024 ? 5 : 20;
  const double keys = static_cast<double>(T) * (c.win + c.extra);
  const double bytes =
      static_cast<double>(T) * (c.win * kKvFp8RowBytes + c.extra * kKvFp4RowBytes) +
      2.0 * 2 * static_cast<double>(T) * kAttnHeads * kKvDim;
  const double flops = 4.0 * kAttnHeads * kKvDim * keys;
  const double byte_ms = bytes / pk.bytes_per_s * 1e3, flop_ms = flops / pk.bf16_flops * 1e3;
  const double floor_ms = std::max(byte_ms, flop_ms);
  DI_ASSIGN_OR_RETURN(double ms, time_case(sets, 0, iters));
  std::string split;
  for (int h : {16, 32, 64}) {
    DI_ASSIGN_OR_RETURN(double v, time_case(sets, h, iters, 0, 1));
    char s[32];
    std::snprintf(s, sizeof s, "%s%.4f", h == 16 ? "" : " / ", v);
    split += s;
  }
  if (ws_bytes > 0) {  // the split path, forced
    DI_ASSIGN_OR_RETURN(double v, time_case(sets, 0, iters, 0, 2));
    char s[32];
    std::snprintf(s, sizeof s, " / split %.4f", v);
    split += s;
  }
  {  // the automatic choice without the sm_90a kernels, and each of them forced
    DI_ASSIGN_OR_RETURN(double v, time_case(sets, 0, iters, 0, 0, 1));
    char s[64];
    std::snprintf(s, sizeof s, " / no-wgmma %.4f", v);
    split += s;
    for (int kernel : {2, 3}) {
      Expected<double> w = time_case(sets, 0, iters, 0, 1, kernel);
      std::snprintf(s, sizeof s, " / %s %s", kernel == 2 ? "wgmma" : "seesaw",
                    w.has_value() ? std::to_string(*w).c_str() : "-");
      split += s;
    }
  }
  if (T >= 32) {  // the 64-head mma.sync kernel vs the seesaw kernel, alternating, best of 3
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 3; ++rep) {
      for (int v = 0; v < 2; ++v) {
        Expected<double> ms_v = time_case(sets, 64, iters, 0, 1, v == 0 ? 1 : 3);
        if (ms_v.has_value()) best[v] = std::min(best[v], *ms_v);
      }
    }
    char s[128];
    std::snprintf(s, sizeof s, " / A/B 64 heads: mma.sync %.4f, seesaw %.4f", best[0], best[1]);
    split += s;
  }
  std::printf("| %s T=%lld win=%d sel=%d | %.4f | %.4f | %.4f | %.4f | %.3f | %.0f | %.0f | %s |\n",
              c.prefill ? "prefill" : "decode", static_cast<long long>(T), c.win, c.extra, ms,
              byte_ms, flop_ms, floor_ms, floor_ms / ms, bytes / (ms * 1e-3) / 1e9,
              flops / (ms * 1e-3) / 1e12, split.c_str());
  if (ablations) {  // stages left out, the mma.sync kernel at auto heads: where the time goes
    std::string line;
    for (int m : {1, 2, 4, 7}) {
      DI_ASSIGN_OR_RETURN(double v, time_case(sets, 0, iters, m));
      char s[80];
      std::snprintf(s, sizeof s, " %s%s%s %.4f ms;", m & 1 ? "-load" : "", m & 2 ? "-decode" : "",
                    m & 4 ? "-mma" : "", v);
      line += s;
    }
    ablation_lines.push_back(std::string(c.prefill ? "prefill" : "decode") +
                             " T=" + std::to_string(T) + ":" + line);
    // The seesaw kernel (sm_90a only): the producer's loads, its decode, both left out.
    line.clear();
    for (int m : {1, 2, 3}) {
      Expected<double> v = time_case(sets, 0, iters, m, 1, 3);
      if (!v.has_value()) break;
      char s[80];
      std::snprintf(s, sizeof s, " %s%s %.4f ms;", m & 1 ? "-load" : "", m & 2 ? "-decode" : "",
                    *v);
      line += s;
    }
    if (!line.empty()) {
      ablation_lines.push_back(std::string(c.prefill ? "prefill" : "decode") +
                               " T=" + std::to_string(T) + ", seesaw:" + line);
    }
  }
  return {};
}

// For a profiler: the prefill and one decode case, a few calls each, no peaks or tables.
Status profile_run() {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(uint8_t * kv, buf.upload(random_pool(kPool8Rows, true, 1)));
  DI_ASSIGN_OR_RETURN(uint8_t * extra_kv, buf.upload(random_pool(kPool4Rows, false, 2)));
  Peaks none{1.0, 1.0};
  std::vector<std::string> unused;
  for (const Case& c :
       {Case{4096, 128, 512, true}, Case{8, 128, 512, false}, Case{64, 128, 2048, false}}) {
    DI_RETURN_IF_ERROR(bench_case(c, kv, extra_kv, none, -1, unused));
  }
  return sequence_prefill_case(kv, kPool8Rows, extra_kv, kPool4Rows, 1.0, 1.0, true);
}

Status run(bool prefill_only) {
  cudaDeviceProp prop{};
  DI_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  DI_ASSIGN_OR_RETURN(Peaks pk, measure_peaks());
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::printf("measured: copy %.0f GB/s (read+write), cuBLASLt bf16 %.0f TFLOP/s (8192^3)\n\n",
              pk.bytes_per_s / 1e9, pk.bf16_flops / 1e12);
  DeviceBuffers buf;
  std::vector<std::string> ablation_lines;
  DI_ASSIGN_OR_RETURN(uint8_t * kv, buf.upload(random_pool(kPool8Rows, true, 1)));
  DI_ASSIGN_OR_RETURN(uint8_t * extra_kv, buf.upload(random_pool(kPool4Rows, false, 2)));
  if (prefill_only) {
    return sequence_prefill_case(kv, kPool8Rows, extra_kv, kPool4Rows, pk.bytes_per_s,
                                 pk.bf16_flops, false);
  }
  std::printf(
      "| case | ms | byte floor ms | FLOP floor ms | floor ms | floor/time | GB/s | TFLOP/s | ms "
      "at 16 / 32 / 64 heads per block (one block per query) / split path "
      "|\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c :
       {Case{1, 128, 512, false}, Case{8, 128, 512, false}, Case{16, 128, 512, false},
        Case{64, 128, 512, false}, Case{256, 128, 512, false}, Case{64, 128, 2048, false},
        Case{4096, 128, 512, true}}) {
    DI_RETURN_IF_ERROR(
        bench_case(c, kv, extra_kv, pk, c.queries >= 64 && c.extra == 512 ? 1 : 0, ablation_lines));
  }
  std::printf("\nstages left out (garbage outputs; timing only):\n");
  for (const auto& l : ablation_lines) std::printf("  %s\n", l.c_str());
  return sequence_prefill_case(kv, kPool8Rows, extra_kv, kPool4Rows, pk.bytes_per_s, pk.bf16_flops,
                               false);
}

}  // namespace

int sparse_attention_bench(AttentionBench what) {
  Status s = what == AttentionBench::kProfile ? profile_run()
                                              : run(what == AttentionBench::kSequencePrefill);
  if (!s.ok()) {
    std::fprintf(stderr, "sparse attention bench: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace di::bench
