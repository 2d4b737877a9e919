// Internal to the split path of sparse_attention_fp8 (sparse_attention_split.cu): its second
// kernel (sparse_attention_combine.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

// Enqueues softmax and PV for every query of `a` from the workspace: logits sg [T][64][nkp]
// (scaled, log2 domain, -inf for empty slots) and decoded keys kg [T][nkp][512] (bf16 times
// 2^-32); writes a.out. sms picks the tiling (same bits for any).
cudaError_t split_combine(const SparseAttentionFp8Args& a,
                          const float* sg,
                          const uint16_t* kg,
                          int nkp,
                          int sms,
                          cudaStream_t stream);

}  // namespace di::backend::cuda
