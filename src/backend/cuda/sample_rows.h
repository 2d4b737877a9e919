// Token sampling on the device (Ops::sample_rows): kernels/ref/sample_row.h's processors and draw,
// bitwise, one team of CTAs per row (sample_rows.cu says how). Every pointer is device memory; the
// launcher only enqueues work.
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

// How a launch spreads the rows; every choice draws the same tokens. ranks: CTAs per row (1, 2,
// 4, 8 or 16; a thread-block cluster when > 1). rows_per_sm, for ranks 1: 1 or 2 resident rows
// per SM (0: 2 when rows outnumber the SMs).
struct SampleLaunch {
  int ranks = 1;
  int rows_per_sm = 0;
};

// What the device can run: its SMs, and how many teams of 1, 2, 4, 8 and 16 CTAs it holds at
// once (0: that size cannot launch, e.g. clusters on a device before sm_90).
struct SampleLimits {
  int sms = 0;
  int max_teams[5] = {0, 0, 0, 0, 0};
};
cudaError_t sample_limits(SampleLimits* limits);

// The team size for a batch of `rows`: the largest whose teams all run at once on the SMs.
int sample_ranks(int64_t rows, const SampleLimits& limits);

// x [rows, cols]: processed in place; out[r] = row r's token (-1 for skipped rows).
cudaError_t sample_rows(float* x,
                        int64_t rows,
                        int64_t cols,
                        const SampleRowsDevice& a,
                        int32_t* out,
                        cudaStream_t s,
                        SampleLaunch how = {});

}  // namespace di::backend::cuda
