// Row-wise ops of the V4.1 forward with the reference's numerics: RMSNorm, interleaved RoPE,
// clamped SwiGLU, the MoE router, the Engram gate and the compressor's softmax pooling.
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace di::kernels {

void rms_norm_row(const float* x, int64_t n, const float* w, float eps, float* y);

// Rotates pairs (2i, 2i+1) of x[0 .. 2*inv_freq.size()) at `position`; rounds to bf16.
void rope_row(float* x, int64_t position, const backend::RopeTable& table, bool inverse);

float silu(float x);
void swiglu_row(
    const float* g, const float* u, int64_t n, float row_weight, float limit, float* out);

void moe_route_row(const float* scores_in /*[num_experts] raw x.gate*/,
                   const float* bias,
                   const backend::RouteParams& p,
                   int32_t* experts,
                   float* weights);

void engram_gate_row(
    float* x, const float* kv, const float* qk_weight, int hc, int64_t dim, float eps);

void softmax_pool_channels(const float* kv, const float* score, int group, int64_t dim, float* out);

}  // namespace di::kernels
