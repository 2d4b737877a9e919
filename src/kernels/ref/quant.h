// Fake quantization of activations exactly as the reference's act_quant / fp4_act_quant
// (bit-exact: power-of-two scales from exponent bits, saturating round-to-nearest-even casts).
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace di::kernels {

// One row of n values (n % 32 == 0) -> e4m3 values (as floats) and one power-of-two scale per 32.
// x ~= q * scale. amax is floored at 1e-4 (reference act_quant with scale_fmt ue8m0).
void quantize_row_fp8(const float* x, int64_t n, int block, float* q, float* scales);

// In place: x = bf16(e4m3(x / s) * s) per block (act_quant inplace=True).
void fake_quant_row_fp8(float* x, int64_t n, int block);

// In place fp4 round trip (fp4_act_quant inplace=True), block 32 ue8m0 or block 16 e4m3 scales.
void fake_quant_row_fp4(float* x, int64_t n, backend::Fp4ScaleKind kind);

}  // namespace di::kernels
