#include "backend/select.h"

#include "backend/cpu/cpu_ops.h"
#include "backend/tracing_ops.h"
#ifdef DI_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

namespace di::backend {

bool cuda_backend_built() {
#ifdef DI_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

Expected<std::unique_ptr<Ops>> make_plain_backend(ThreadPool& pool, const BackendOptions& options) {
  if (options.name == "cpu") return std::unique_ptr<Ops>(std::make_unique<CpuOps>(pool));
  if (options.name == "cuda") {
#ifdef DI_HAVE_CUDA
    CudaOptions co;
    co.arena_bytes = options.cuda_arena_bytes;
    co.profile_ops = options.profile_ops;
    co.time_idle = options.time_idle;
    co.graphs = options.cuda_graphs;
    co.side_lines = options.cuda_side_lines;
    if (options.cuda_gemm == "tensor") {
      co.gemm = CudaGemm::kTensor;
    } else if (options.cuda_gemm == "fp8" || options.cuda_gemm == "wgmma") {
      co.gemm = CudaGemm::kFp8;  // "wgmma": the mode's name before pgemm3
    } else if (options.cuda_gemm != "exact") {
      return invalid_argument("unknown --cuda-gemm '" + options.cuda_gemm +
                              "' (exact, tensor or fp8)");
    }
    auto ops = CudaOps::create(pool, co);
    if (!ops) return ops.status().with_context("cuda backend");
    return std::unique_ptr<Ops>(std::move(ops).value());
#else
    return unimplemented(
        "cuda backend: this binary was built without it (configure with -DDEEPINFER_CUDA=ON)");
#endif
  }
  return invalid_argument("unknown backend '" + options.name + "' (cpu or cuda)");
}

}  // namespace

Expected<std::unique_ptr<Ops>> make_backend(ThreadPool& pool, const BackendOptions& options) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, make_plain_backend(pool, options));
  if (options.trace_ops.empty()) return ops;
  DI_ASSIGN_OR_RETURN(std::unique_ptr<TracingOps> traced,
                      TracingOps::create(std::move(ops), options.trace_ops));
  return std::unique_ptr<Ops>(std::move(traced));
}

}  // namespace di::backend
