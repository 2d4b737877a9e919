// --mix-pipe: the mHC mix products (V4.1: hc 4 x 5120 = 20,480-wide rows, 24 outputs + the sum of
// squares) at 1-64 rows, the staged kernel (load everything, then the chains) against the
// pipelined one (hc_mix_pipe.cu) at 8 and 16 warps, each launch a programmatic dependent of the
// one before it (as in the decode step's graph). Two weight states: "hot" (the same fn every
// launch: it stays in the L2) and "cold" (launch i reads copy i % kCopies of fn, 126 MB: over the
// L2, as in a decode step, where the other layers' weights pass through it between two uses).
// The variants alternate twice inside the run (run-to-run spread is 3-5 %); each row prints the
// hash of raw and the sums of squares, which must agree across the variants.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/hc_mix_pipe.h"
#include "cuda/bench_util.h"
#include "cuda/fp32_peak.h"
#include "cuda/small_ops_bench.h"

namespace di::bench {
namespace {

constexpr int kCopies = 64;
constexpr int kLaunchesPerGraph = 64;

struct Variant {
  const char* name;
  int warps;  // 0: the staged kernel
};

Status mix_pipe_rows(int64_t rows, double add_ns) {
  namespace cu = backend::cuda;
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t hc_dim = hc * 5120;
  const size_t fn_size = static_cast<size_t>(mix * hc_dim);
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(rows * hc_dim), 3)));
  DI_ASSIGN_OR_RETURN(float* fn, buf.alloc<float>(fn_size * kCopies));
  const std::vector<float> fn_host = random_floats(fn_size, 4);
  for (int c = 0; c < kCopies; ++c) {
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(fn + c * fn_size, fn_host.data(), fn_size * sizeof(float),
                                       cudaMemcpyHostToDevice));
  }
  DI_ASSIGN_OR_RETURN(float* raw, buf.alloc<float>(static_cast<size_t>(rows * mix)));
  DI_ASSIGN_OR_RETURN(float* ss, buf.alloc<float>(static_cast<size_t>(rows)));
  const Variant variants[] = {{"staged", 0}, {"pipelined 16 warps", 16}, {"pipelined 8 warps", 8}};
  for (bool cold : {false, true}) {
    double best[3] = {1e30, 1e30, 1e30};
    uint64_t hash[3] = {0, 0, 0};
    for (int rep = 0; rep < 2; ++rep) {
      for (int v = 0; v < 3; ++v) {
        auto launch = [&](int i, cudaStream_t s) {
          const float* f = fn + (cold ? static_cast<size_t>(i % kCopies) * fn_size : 0);
          if (variants[v].warps == 0) {
            return cu::hc_mix_products_staged(x, rows, hc_dim, f, mix, 0, raw, ss, s);
          }
          return cu::hc_mix_products_pipelined(x, rows, hc_dim, f, mix, 0, raw, ss,
                                               variants[v].warps, s);
        };
        DI_CUDA_RETURN_IF_ERROR(cudaMemset(raw, 0, sizeof(float) * rows * mix));
        DI_CUDA_RETURN_IF_ERROR(cudaMemset(ss, 0, sizeof(float) * rows));
        DI_ASSIGN_OR_RETURN(double us, graph_us(3, launch, kLaunchesPerGraph));
        best[v] = std::min(best[v], us);
        DI_ASSIGN_OR_RETURN(uint64_t hr, device_hash(raw, sizeof(float) * rows * mix));
        DI_ASSIGN_OR_RETURN(uint64_t hs, device_hash(ss, sizeof(float) * rows));
        hash[v] = hr ^ (hs * 1099511628211ull);
      }
    }
    const double floor_us = static_cast<double>(hc_dim / 8) * add_ns * 1e-3;
    for (int v = 0; v < 3; ++v) {
      std::printf("| %s | %lld | %s | %.2f | %.2f | %.2f | %016llx |\n", variants[v].name,
                  static_cast<long long>(rows), cold ? "cold" : "hot", best[v], best[0] / best[v],
                  floor_us, static_cast<unsigned long long>(hash[v]));
    }
  }
  return {};
}

// Where the pipelined kernel's time goes at 1 row, fn hot: the kernel with parts removed
// (hc_mix_pipe_probe; wrong outputs), next to the whole one, alternating twice.
Status mix_pipe_probes(double add_ns) {
  namespace cu = backend::cuda;
  const int mix = 24;
  const int64_t hc_dim = 20480;
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(hc_dim), 3)));
  DI_ASSIGN_OR_RETURN(float* fn, buf.upload(random_floats(static_cast<size_t>(mix * hc_dim), 4)));
  DI_ASSIGN_OR_RETURN(float* raw, buf.alloc<float>(mix));
  DI_ASSIGN_OR_RETURN(float* ss, buf.alloc<float>(1));
  const char* names[] = {"whole kernel", "products + barriers, no adds", "adds alone",
                         "launch + grid dependency + store"};
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int rep = 0; rep < 2; ++rep) {
    for (int p = 0; p < 4; ++p) {
      auto launch = [&](int, cudaStream_t s) {
        return p == 0 ? cu::hc_mix_products_pipelined(x, 1, hc_dim, fn, mix, 0, raw, ss, 16, s)
                      : cu::hc_mix_pipe_probe(x, 1, hc_dim, fn, mix, raw, ss, p, s);
      };
      DI_ASSIGN_OR_RETURN(double us, graph_us(3, launch, kLaunchesPerGraph));
      best[p] = std::min(best[p], us);
    }
  }
  std::printf(
      "\npipelined kernel (16 warps) at 1 row, fn hot, parts removed; chain floor %.2f us\n\n",
      static_cast<double>(hc_dim / 8) * add_ns * 1e-3);
  std::printf("| probe | us |\n|---|---|\n");
  for (int p = 0; p < 4; ++p) std::printf("| %s | %.2f |\n", names[p], best[p]);
  return {};
}

}  // namespace

Status run_mix_pipe_bench() {
  DI_ASSIGN_OR_RETURN(double add_ns, measure_dependent_fadd_ns());
  std::printf(
      "hc_mix_products hc=4 dim=5120 (24 outputs + sum of squares): us per launch, graph of %d "
      "dependent launches, best of 2 alternations x 3 replays; dependent fp32 add %.3f ns; floor "
      "= 2,560 chain steps x add latency\n\n",
      kLaunchesPerGraph, add_ns);
  std::printf("| kernel | rows | fn | us | staged/this | chain floor us | output hash |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t rows : {1, 2, 4, 8, 16, 64}) DI_RETURN_IF_ERROR(mix_pipe_rows(rows, add_ns));
  return mix_pipe_probes(add_ns);
}

}  // namespace di::bench
