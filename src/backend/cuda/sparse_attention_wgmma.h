// Internal to sparse_attention_fp8.cu: the sm_90a wgmma kernel of sparse_attention_fp8
// (sparse_attention_wgmma.cu), one block of two warpgroups per query, 64 heads.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

// Whether a device of this compute capability major runs the kernel (the build targets sm_90a).
bool sparse_attention_wgmma_supported(int major);

// Enqueues the kernel for a validated call (any number of keys up to kAttnMaxKeys).
cudaError_t sparse_attention_wgmma(const SparseAttentionFp8Args& a, cudaStream_t stream);

}  // namespace di::backend::cuda
