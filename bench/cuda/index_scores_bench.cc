// `cuda_kernels_bench --index-scores`: the indexer's scores (64 heads x 128, paged fp32 key rows,
// FP4-quantized q and keys as the model makes them) on tensor cores and on CUDA cores, against
// floors measured in the same run: key bytes (+ q, weights, scores) / copy bandwidth, and
// 2 x queries x keys x 64 x 128 FLOPs / cuBLASLt's bf16 rate. Keys rotate through copies larger
// than L2 (each copy its own page tables over one pool).
#include "cuda/index_scores_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "kernels/ref/quant.h"

namespace di::bench {
namespace {

constexpr int kHeads = 64, kDim = 128, kPer = 64;

template <class F>
Expected<double> mean_ms(int iters, F&& fn) {
  return mean_event_ms(iters, std::forward<F>(fn));
}

std::vector<float> fp4_rows(int64_t rows, int dim, uint32_t seed) {
  std::vector<float> v = random_floats(static_cast<size_t>(rows * dim), seed);
  for (int64_t r = 0; r < rows; ++r)
    kernels::fake_quant_row_fp4(v.data() + r * dim, dim, backend::Fp4ScaleKind::kUe8m0Block32);
  return v;
}

using Floors = MeasuredPeaks;

Status bench_case(int64_t nq, int64_t nk, const Floors& f) {
  DeviceBuffers buf;
  const int64_t pages_per_query = (nk + kPer - 1) / kPer;
  const int64_t set_pages = nq * pages_per_query;
  const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / (set_pages * kPer * kDim * 4));
  const int64_t pool_pages = set_pages * copies;
  // 4096 distinct template rows repeated over the pool (host time), FP4-exact like the model's.
  const std::vector<float> tmpl = fp4_rows(4096, kDim, 7);
  std::vector<float> pool(static_cast<size_t>(pool_pages * kPer * kDim));
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = tmpl[i % tmpl.size()];
  DI_ASSIGN_OR_RETURN(float* d_pool, buf.upload(pool));
  pool = {};
  DI_ASSIGN_OR_RETURN(float* q, buf.upload(fp4_rows(nq * kHeads, kDim, 8)));
  std::vector<float> w = random_floats(static_cast<size_t>(nq * kHeads), 9);
  for (float& x : w) x *= 0.01f;
  DI_ASSIGN_OR_RETURN(float* d_w, buf.upload(w));
  std::vector<int32_t> pages(static_cast<size_t>(pool_pages));
  for (int64_t i = 0; i < pool_pages; ++i) pages[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  DI_ASSIGN_OR_RETURN(int32_t * d_pages, buf.upload(pages));
  std::vector<const int64_t*> offsets;
  for (int64_t c = 0; c < copies; ++c) {
    std::vector<int64_t> off(static_cast<size_t>(nq));
    for (int64_t t = 0; t < nq; ++t)
      off[static_cast<size_t>(t)] = c * set_pages + t * pages_per_query;
    DI_ASSIGN_OR_RETURN(int64_t * d, buf.upload(off));
    offsets.push_back(d);
  }
  DI_ASSIGN_OR_RETURN(int64_t * vis, buf.upload(std::vector<int64_t>(static_cast<size_t>(nq), nk)));
  DI_ASSIGN_OR_RETURN(float* scores, buf.alloc<float>(static_cast<size_t>(nq * nk)));
  DI_ASSIGN_OR_RETURN(unsigned long long* fb, buf.alloc<unsigned long long>(1));
  auto keys_of = [&](int i) {
    backend::cuda::PagedKeys k;
    k.pool = d_pool;
    k.pages = d_pages;
    k.page_offset = offsets[static_cast<size_t>(i % copies)];
    k.per = kPer;
    return k;
  };
  const double bytes = 4.0 * nq * nk * kDim + 4.0 * nq * kHeads * (kDim + 1) + 4.0 * nq * nk;
  const double flops = 2.0 * nq * nk * kHeads * kDim;
  const double floor_ms = std::max(bytes / f.bytes_per_s, flops / f.bf16_flops) * 1e3;
  auto row = [&](const char* kernel, double ms, const char* note) {
    std::printf(
        "| %s q=%lld keys=%lld | %.4f | %.4f (bytes %.4f, FLOPs %.4f) | %.3f | %.0f | %.1f | %s "
        "|\n",
        kernel, static_cast<long long>(nq), static_cast<long long>(nk), ms, floor_ms,
        bytes / f.bytes_per_s * 1e3, flops / f.bf16_flops * 1e3, floor_ms / ms,
        bytes / (ms * 1e-3) / 1e9, flops / (ms * 1e-3) / 1e12, note);
  };
  // Fallback count on this data (one call).
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(fb, 0, sizeof(unsigned long long)));
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::index_scores_tc(q, d_w, nq, kHeads, kDim, keys_of(0), nk,
                                                         vis, scores, nullptr, 0, fb));
  unsigned long long fell = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(&fell, fb, sizeof fell, cudaMemcpyDeviceToHost));
  char note[96];
  std::snprintf(note, sizeof note, "default split; %.4f %% of (key, head) dots recomputed",
                100.0 * static_cast<double>(fell) / (static_cast<double>(nq) * nk * kHeads));
  DI_ASSIGN_OR_RETURN(double tc_ms, mean_ms(20, [&](int i) {
                        return backend::cuda::index_scores_tc(q, d_w, nq, kHeads, kDim, keys_of(i),
                                                              nk, vis, scores, nullptr);
                      }));
  row("tensor cores", tc_ms, note);
  for (int kpc : {64, 128, 256, 512, 1024}) {
    DI_ASSIGN_OR_RETURN(double ms, mean_ms(20, [&](int i) {
                          return backend::cuda::index_scores_tc(
                              q, d_w, nq, kHeads, kDim, keys_of(i), nk, vis, scores, nullptr, kpc);
                        }));
    std::snprintf(note, sizeof note, "%d keys per CTA", kpc);
    row("tensor cores", ms, note);
  }
  DI_ASSIGN_OR_RETURN(double simt_ms, mean_ms(nk > 4096 ? 1 : 3, [&](int i) {
                        return backend::cuda::index_scores_simt(
                            q, d_w, nq, kHeads, kDim, keys_of(i), nk, vis, scores, nullptr);
                      }));
  row("CUDA cores (before)", simt_ms, "thread per (query, key)");
  return {};
}

}  // namespace

int index_scores_bench() {
  auto run = []() -> Status {
    DI_ASSIGN_OR_RETURN(const Floors f, measure_copy_and_bf16_peaks());
    std::printf(
        "\nindex scores (64 heads x 128): copy %.0f GB/s (read+write), cuBLASLt bf16 %.0f "
        "TFLOP/s (8192^3)\n",
        f.bytes_per_s / 1e9, f.bf16_flops / 1e12);
    std::printf("| kernel | ms | floor ms | floor/time | GB/s | TFLOP/s | notes |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{64, 1024}, {256, 1024}, {64, 16384}}) {
      DI_RETURN_IF_ERROR(bench_case(nq, nk, f));
    }
    return {};
  };
  const Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "index scores bench: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace di::bench
