// The --backend flags shared by the commands that run the model (check-golden, generate, bench).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>

#include "backend/select.h"

namespace di::cli {

inline void add_backend_flags(CLI::App& app, backend::BackendOptions& opts) {
  app.add_option("--backend", opts.name, "cpu (default) or cuda (needs a DEEPINFER_CUDA build)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option_function<size_t>(
         "--cuda-arena-mb", [&opts](size_t mb) { opts.cuda_arena_bytes = mb << 20; },
         "device memory arena for the weights and per-op scratch, allocated once at start-up "
         "(default 8192)")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--cuda-gemm", opts.cuda_gemm,
         "FP8 GEMM on cuda: tensor (default; tensor cores, within tolerance of cpu, "
         "batch-invariant), exact (bitwise = cpu, CUDA cores) or wgmma (sm_90a prefill kernel, "
         "faster, looser: fails check-golden's per-layer tolerances)")
      ->check(CLI::IsMember({"exact", "tensor", "wgmma"}));
}

}  // namespace di::cli
