// Manifold-constrained hyper-connections, single-pass variant (spec §1.4; reference Block.hc_*
// and kernel hc_split_sinkhorn): the residual stream is hc copies of the hidden state.
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace di::kernels {

// x: [hc * dim] of one token; fn: [(2 + hc) * hc, hc * dim]; scale: [3]; base: [(2 + hc) * hc].
void hc_mixes_token(const float* x,
                    int64_t hc_dim,
                    const float* fn,
                    const float* scale,
                    const float* base,
                    int hc,
                    int sinkhorn_iters,
                    float hc_eps,
                    float norm_eps,
                    backend::HcCoefficients* out);

// y = bf16(sum_k pre[k] * x_k) for one token.
void hc_collapse_token(const float* x, const float* pre, int hc, int64_t dim, float* y);

// out_j = bf16(post[j] * y + sum_i comb[i, j] * residual_i) for one token.
void hc_expand_token(const float* y,
                     const float* residual,
                     const backend::HcCoefficients& c,
                     int hc,
                     int64_t dim,
                     float* out);

}  // namespace di::kernels
