// --mix-rows: the mHC mix products of many rows (hc_mix_rows; V4.1: hc 4 x 5120 = 20,480-wide
// rows, 24 outputs + the sum of squares) at 65-16,384 rows: session 7's kernel against the
// current one, alternating twice in the run (run-to-run spread is 3-5 %), each launch a
// programmatic dependent of the one before it. The floor is the largest of: x's and fn's bytes at
// the measured copy bandwidth; the products as a rounded multiply then a rounded add (the order the
// contract fixes) at the measured CUDA-core rate for that pair; one chain of hc * dim / 8
// dependent adds. Each row prints the hash of raw and the sums of squares: they must agree.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hc_mix_rows.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "cuda/fp32_peak.h"
#include "cuda/mix_rows_previous.h"
#include "cuda/small_ops_bench.h"

namespace di::bench {
namespace {

struct Floors {
  double copy_bytes_per_s, mul_add_flops, add_ns;
};

Status mix_rows(int64_t rows, const Floors& f) {
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t hc_dim = hc * 5120;
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * hc_dim), 5)));
  DI_ASSIGN_OR_RETURN(float* fn, buf.upload(random_floats(static_cast<size_t>(mix * hc_dim), 6)));
  DI_ASSIGN_OR_RETURN(float* raw, buf.alloc<float>(static_cast<size_t>(rows * mix)));
  DI_ASSIGN_OR_RETURN(float* ss, buf.alloc<float>(static_cast<size_t>(rows)));
  const char* names[] = {"session 7 (2 rows a block)", "by-lane staging"};
  double best[2] = {1e30, 1e30};
  uint64_t hash[2] = {0, 0};
  for (int rep = 0; rep < 2; ++rep) {
    for (int v = 0; v < 2; ++v) {
      auto launch = [&](int, cudaStream_t s) {
        return v == 0 ? hc_mix_rows_previous(x, rows, hc_dim, fn, mix, raw, ss, s)
                      : backend::cuda::hc_mix_rows(x, rows, hc_dim, fn, mix, raw, ss, false, s);
      };
      DI_CUDA_RETURN_IF_ERROR(cudaMemset(raw, 0, sizeof(float) * rows * mix));
      DI_CUDA_RETURN_IF_ERROR(cudaMemset(ss, 0, sizeof(float) * rows));
      DI_ASSIGN_OR_RETURN(double us, graph_us(3, launch, rows >= 4096 ? 4 : 16));
      best[v] = std::min(best[v], us);
      DI_ASSIGN_OR_RETURN(uint64_t hr, device_hash(raw, sizeof(float) * rows * mix));
      DI_ASSIGN_OR_RETURN(uint64_t hs, device_hash(ss, sizeof(float) * rows));
      hash[v] = hr ^ (hs * 1099511628211ull);
    }
  }
  const double bytes = 4.0 * static_cast<double>((rows + mix) * hc_dim);
  const double flops = 2.0 * static_cast<double>(rows * (mix + 1) * hc_dim);
  const double floor_us = std::max({bytes / f.copy_bytes_per_s * 1e6, flops / f.mul_add_flops * 1e6,
                                    static_cast<double>(hc_dim / 8) * f.add_ns * 1e-3});
  for (int v = 0; v < 2; ++v) {
    std::printf("| %s | %lld | %.1f | %.1f | %.2f | %.2f | %016llx |\n", names[v],
                static_cast<long long>(rows), best[v], floor_us, floor_us / best[v],
                best[0] / best[v], static_cast<unsigned long long>(hash[v]));
  }
  return {};
}

}  // namespace

Status run_mix_rows_bench() {
  Floors f{};
  DI_ASSIGN_OR_RETURN(f.copy_bytes_per_s, measure_copy_bytes_per_s());
  DI_ASSIGN_OR_RETURN(Fp32Peaks peaks, measure_fp32_peaks());
  f.mul_add_flops = peaks.mul_add_flops;
  DI_ASSIGN_OR_RETURN(f.add_ns, measure_dependent_fadd_ns());
  std::printf(
      "hc_mix_rows hc=4 dim=5120 (24 outputs + sum of squares): us per launch in a graph of "
      "dependent launches, best of 2 alternations x 3 replays; copy %.0f GB/s, fp32 mul+add %.1f "
      "TFLOP/s, dependent add %.3f ns\n\n",
      f.copy_bytes_per_s * 1e-9, f.mul_add_flops * 1e-12, f.add_ns);
  std::printf("| kernel | rows | us | floor us | floor/time | speedup | output hash |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t rows : {65, 128, 256, 1024, 4096, 16384}) DI_RETURN_IF_ERROR(mix_rows(rows, f));
  return {};
}

}  // namespace di::bench
