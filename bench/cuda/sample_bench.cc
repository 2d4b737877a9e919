// cuda_kernels_bench --sample-rows: the sampling kernel (backend/cuda/sample_rows.cu) at the V4.1
// vocabulary for batch 1, 8, 64 and 256 and five modes (temperature 0.8 alone, with top-k 50 and
// top-p 0.95, with top-p 0.9 alone, with min-p 0.05; top-p 0.95 alone on flat rows, which
// overflow the short list), with the team size CudaOps picks (sample_ranks) and with one CTA
// per row (1 or 2 rows per SM). Logits are normal with sd 3 (flat: 0.3; fp32) and rotate through
// copies larger than 4x the L2, so every launch reads them from HBM; the "L2-hot" column re-reads
// one copy (the decode step's case: the LM head has just written them). Floor = the logits'
// bytes / copy bandwidth measured here (1 GiB D2D cudaMemcpyAsync, read + write). "same" says
// every launch drew the same tokens.
#include "cuda/sample_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sample_rows.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "kernels/ref/sample_math.h"

namespace di::bench {
namespace {

namespace ks = kernels::sample;

constexpr int64_t kVocab = 129280;
constexpr size_t kRotateBytes = size_t{256} << 20;

struct Mode {
  const char* name;
  int32_t top_k;
  float top_p, min_p;
  float sd;
};

Expected<std::vector<int32_t>> tokens(const int32_t* d, int64_t rows) {
  std::vector<int32_t> h(static_cast<size_t>(rows));
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(h.data(), d, sizeof(int32_t) * h.size(), cudaMemcpyDefault));
  return h;
}

Status bench_batch(int64_t rows,
                   const Mode* modes,
                   int n_modes,
                   float sd,
                   double bw,
                   const backend::cuda::SampleLimits& limits) {
  DeviceBuffers buf;
  const size_t count = static_cast<size_t>(rows * kVocab);
  std::vector<float> host = random_floats(count, static_cast<uint32_t>(rows));
  for (float& v : host) v *= sd;
  const size_t copies = std::max<size_t>(2, kRotateBytes / (sizeof(float) * count) + 1);
  std::vector<float*> x;
  for (size_t c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(float* d, buf.upload(host));
    x.push_back(d);
  }
  DI_ASSIGN_OR_RETURN(int32_t * out, buf.alloc<int32_t>(static_cast<size_t>(rows)));
  const double floor_us = sizeof(float) * static_cast<double>(count) / bw * 1e6;
  const int iters = rows >= 64 ? 20 : 100;
  for (int m = 0; m < n_modes; ++m) {
    if (modes[m].sd != sd) continue;
    std::vector<ks::RowParams> params(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      ks::RowParams& p = params[static_cast<size_t>(r)];
      p.key = ks::row_key(1234, static_cast<uint64_t>(r), 99);
      p.temperature = 0.8f;
      p.top_k = modes[m].top_k;
      p.top_p = modes[m].top_p;
      p.min_p = modes[m].min_p;
    }
    DI_ASSIGN_OR_RETURN(ks::RowParams * dp, buf.upload(params));
    backend::cuda::SampleRowsDevice a;
    a.params = dp;
    backend::cuda::SampleLaunch team;
    team.ranks = backend::cuda::sample_ranks(rows, limits);
    const backend::cuda::SampleLaunch hows[3] = {team, {1, 1}, {1, 2}};
    double us[3] = {0, 0, 0};
    std::vector<int32_t> drawn[3];
    for (int v = 0; v < 3; ++v) {
      auto launch = [&](int i) {
        return backend::cuda::sample_rows(x[static_cast<size_t>(i) % copies], rows, kVocab, a, out,
                                          nullptr, hows[v]);
      };
      DI_ASSIGN_OR_RETURN(double ms, mean_event_ms(iters, launch));
      us[v] = ms * 1e3;
      DI_CUDA_RETURN_IF_ERROR(launch(0));
      DI_ASSIGN_OR_RETURN(drawn[v], tokens(out, rows));
    }
    DI_ASSIGN_OR_RETURN(double hot_ms, mean_event_ms(iters, [&](int) {
                          return backend::cuda::sample_rows(x[0], rows, kVocab, a, out, nullptr,
                                                            team);
                        }));
    const double best = std::min({us[0], us[1], us[2]});
    std::printf("| %s | %lld | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.4f | %s |\n",
                modes[m].name, static_cast<long long>(rows), team.ranks, us[0], us[1], us[2],
                hot_ms * 1e3, floor_us, floor_us / best,
                drawn[0] == drawn[1] && drawn[0] == drawn[2] ? "same" : "DIFFER");
  }
  return {};
}

}  // namespace

Status run_sample_bench() {
  DI_ASSIGN_OR_RETURN(double bw, measure_copy_bytes_per_s());
  backend::cuda::SampleLimits limits;
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::sample_limits(&limits));
  std::printf(
      "sample_rows at vocab %lld: copy %.0f GB/s; %d SMs; teams of 2/4/8/16 resident at "
      "once: %d/%d/%d/%d; us per launch (mean of 20-100)\n\n",
      static_cast<long long>(kVocab), bw / 1e9, limits.sms, limits.max_teams[1],
      limits.max_teams[2], limits.max_teams[3], limits.max_teams[4]);
  std::printf(
      "| mode (T=0.8) | batch | team | us team | us 1 CTA, 1 row/SM | us 1 CTA, 2 rows/SM | "
      "us L2-hot (team) | floor us | floor/best | tokens |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const Mode modes[] = {{"temperature only", 0, 1.0f, 0.0f, 3.0f},
                        {"top_k=50 top_p=0.95", 50, 0.95f, 0.0f, 3.0f},
                        {"top_p=0.9", 0, 0.9f, 0.0f, 3.0f},
                        {"min_p=0.05", 0, 1.0f, 0.05f, 3.0f},
                        {"top_p=0.95, flat rows (sd 0.3)", 0, 0.95f, 0.0f, 0.3f}};
  for (int64_t rows : {1, 8, 64, 256}) {
    for (float sd : {3.0f, 0.3f}) DI_RETURN_IF_ERROR(bench_batch(rows, modes, 5, sd, bw, limits));
  }
  return {};
}

}  // namespace di::bench
