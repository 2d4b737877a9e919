// Backend selection by name ("cpu" or "cuda") for the commands that run the model. A build
// without DEEPINFER_CUDA, or a machine without a device, gets a clear Status instead of a backend.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace di::backend {

struct BackendOptions {
  std::string name = "cpu";
  size_t cuda_arena_bytes = size_t{8} << 30;  // the weights (embedding and head included), scratch
  // FP8 GEMM path of the cuda backend: "tensor" (tensor cores, within tolerance of the CPU,
  // batch-invariant; passes check-golden on both golden folders), "exact" (bitwise = CPU) or
  // "fp8" (sm_90 FP8 wgmma for every M: faster prefill, looser numerics; "wgmma" is an old name
  // of it). See CudaGemm in backend/cuda/cuda_ops.h.
  std::string cuda_gemm = "tensor";
  // Time every op of the cuda backend with events (Ops::take_op_profile); slows it down a little.
  bool profile_ops = false;
  // Time the cuda backend's idle gaps after host waits (Ops::device_idle_seconds): two events a
  // wait.
  bool time_idle = false;
  // Replay the model's fixed runs of ops (Ops::begin_segment) as CUDA graphs.
  bool cuda_graphs = true;
  // Run the model's independent work (Ops::begin_side) on a second stream.
  bool cuda_side_lines = true;
  // When set, every op's output is checksummed into this file (TracingOps, `--trace-ops`).
  std::string trace_ops;
};

Expected<std::unique_ptr<Ops>> make_backend(ThreadPool& pool, const BackendOptions& options);

// Whether this binary was built with the CUDA backend.
bool cuda_backend_built();

}  // namespace di::backend
