// Internal to sparse_attention_fp8.cu: the small-batch path of sparse_attention_fp8, which runs
// a query's key blocks on different thread blocks (sparse_attention_split.cu).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

// Enqueues the two kernels (scores per key block, then softmax and PV per head group and value
// slice) for a validated call with num_indices + num_extra > 0 and a workspace of at least
// sparse_attention_fp8_workspace_bytes. sms: the device's SM count (picks the heads per block
// of the first kernel; any choice gives the same bits).
cudaError_t sparse_attention_split(const SparseAttentionFp8Args& a, int sms, cudaStream_t stream);

}  // namespace di::backend::cuda
