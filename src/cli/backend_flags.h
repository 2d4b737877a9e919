// The --backend flags shared by the commands that run the model (check-golden, generate, bench).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

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
         "batch-invariant), exact (bitwise = cpu, CUDA cores) or fp8 (sm_90a FP8 wgmma, faster "
         "prefill, looser numerics; wgmma is its old name)")
      ->check(CLI::IsMember({"exact", "tensor", "fp8", "wgmma"}));
  app.add_option_function<std::string>(
         "--cuda-graphs", [&opts](const std::string& v) { opts.cuda_graphs = v == "on"; },
         "on (default): the model's fixed runs of ops are recorded once as CUDA graphs and "
         "replayed; off: every op is launched on its own")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option_function<std::string>(
         "--cuda-side-lines", [&opts](const std::string& v) { opts.cuda_side_lines = v == "on"; },
         "on (default): work the model knows to be independent (the shared expert, the "
         "compressor, the draft head's KV) runs on a second stream beside the rest at up to 256 "
         "rows; off: one stream (the same results)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--trace-ops", opts.trace_ops,
                 "debugging: write a checksum of every op's output to FILE, a line per output "
                 "(two runs that should agree are diffed; the first differing line names the op); "
                 "CUDA graphs are not replayed while tracing")
      ->type_name("FILE");
}

}  // namespace di::cli
