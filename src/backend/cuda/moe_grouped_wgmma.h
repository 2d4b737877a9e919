// The wgmma expert GEMMs (moe_grouped_wgmma.cu) that moe_grouped_tc.cu runs between its plan and
// combine for many rows per expert (sm_90a only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/moe_grouped.h"
#include "backend/cuda/moe_plan.cuh"

namespace di::backend::cuda {

// moe_grouped_tc.cu's scratch pieces that the two GEMMs read and write.
struct MoeWgmmaBuffers {
  const uint8_t* qx;  // act_quant(x), e4m3 bytes in MMA order, and its scales
  const float* sx;
  uint8_t* qh;  // act_quant(h)
  float* sh;
  float* y;  // [pairs, dim] expert outputs
  moe::Plan plan;
};

// Rows per plan unit of the wgmma GEMMs, and the expected rows per expert from which
// moe_routed_tc_pick takes them.
inline constexpr int kMoeWgmmaUnitRows = 128;
inline constexpr int64_t kMoeWgmmaMinRows = 64;

// Whether the current device runs the wgmma kernels (compute capability 9.0).
bool moe_wgmma_available();

// The grouped w1/w3 (+ SwiGLU + act_quant of h) and w2 GEMMs over a plan of 128-row units.
// mode 0: folded weight scales, one block-sum set per consumer; 1: the same without the fold
// (the two-instruction promotion for every stage: the same bits; tests use it to cover that
// path); 2: folded, two block-sum sets (232 registers per consumer, 40 for the producer).
cudaError_t moe_wgmma_gemms(const MoeRoutedArgs& a,
                            const MoeWgmmaBuffers& b,
                            int mode,
                            cudaStream_t st);

}  // namespace di::backend::cuda
