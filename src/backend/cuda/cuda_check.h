// CUDA errors as Status values (house style §4.6): every runtime call is checked and its failure
// travels to the caller; nothing here aborts.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "util/status.h"

namespace di::backend::cuda {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  const StatusCode code =
      e == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return {code,
          std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}

}  // namespace di::backend::cuda

// Returns a Status from the enclosing function when the CUDA call fails.
#define DI_CUDA_RETURN_IF_ERROR(call) \
  DI_RETURN_IF_ERROR(::di::backend::cuda::cuda_status((call), #call))
