// Token sampling on the device (Ops::sample_rows): kernels/ref/sample_row.h's processors and draw,
// bitwise, one CTA per row (sample_rows.cu says how). Every pointer is device memory; the launcher
// only enqueues work.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ref/sample_row.h"

namespace di::backend::cuda {

// The row lists of kernels::sample::RowsArgs, in device memory.
struct SampleRowsDevice {
  const kernels::sample::RowParams* params = nullptr;  // [rows]
  const int32_t* penalty_tokens = nullptr;
  const int32_t* penalty_counts = nullptr;
  const int32_t* bias_tokens = nullptr;
  const float* bias_values = nullptr;
  const uint32_t* masks = nullptr;
};

// x [rows, cols]: processed in place; out[r] = row r's token (-1 for skipped rows).
// rows_per_sm picks the kernel variant (1 or 2 resident rows per SM; 0: 2 when rows outnumber
// the SMs); every variant draws the same tokens.
cudaError_t sample_rows(float* x,
                        int64_t rows,
                        int64_t cols,
                        const SampleRowsDevice& a,
                        int32_t* out,
                        cudaStream_t s,
                        int rows_per_sm = 0);

}  // namespace di::backend::cuda
