// Internal to sparse_attention_fp8.cu: the sm_90a wgmma kernels of sparse_attention_fp8, one block
// per query, 64 heads: sparse_attention_wgmma.cu (two warpgroups) and sparse_attention_seesaw.cu
// (a producer warpgroup and two consumers that alternate S and softmax over the key blocks).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

// Whether a device of this compute capability major runs the kernel (the build targets sm_90a).
bool sparse_attention_wgmma_supported(int major);

// Enqueues the kernel for a validated call (any number of keys up to kAttnMaxKeys).
cudaError_t sparse_attention_wgmma(const SparseAttentionFp8Args& a, cudaStream_t stream);

// The warp-specialised kernel (same conditions; ignores args.ablate).
cudaError_t sparse_attention_seesaw(const SparseAttentionFp8Args& a, int sms, cudaStream_t stream);

}  // namespace di::backend::cuda
