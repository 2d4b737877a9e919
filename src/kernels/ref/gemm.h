// Matrix products y[m, n] = x[m] . w[n] over a range of output columns, with the reference's
// numerics (fp8_gemm / fp4_gemm / F.linear). The column range lets a backend split work across
// threads without changing any output value.
#pragma once

#include <cstdint>

#include "tensor/weight_view.h"

namespace di::kernels {

// Activations quantized for FP8/FP4 weights: e4m3 values (as floats) and one scale per 32.
struct QuantizedRows {
  const float* values = nullptr;  // [rows, cols]
  const float* scales = nullptr;  // [rows, cols / 32]
  int64_t rows = 0;
  int64_t cols = 0;
};

// FP8 or FP4 weights: per 32-wide K block, an fp32 block sum, scaled by both power-of-two scales,
// accumulated in K order; output rounded to bf16.
void block_scaled_gemm(
    const QuantizedRows& a, const WeightView& w, RowsView y, int64_t n_begin, int64_t n_end);

// BF16 or F32 weights, fp32 accumulation; output rounded to bf16 when round_bf16.
void dense_gemm(ConstRowsView x,
                const WeightView& w,
                RowsView y,
                bool round_bf16,
                int64_t n_begin,
                int64_t n_end);

// Decodes columns [k_begin, k_begin + count) of weight row n into floats (unscaled codes for
// FP8/FP4; values for BF16/F32).
void decode_weight_row(const WeightView& w, int64_t n, int64_t k_begin, int64_t count, float* out);

// The scale of weight element (n, k) for FP8/FP4 weights.
float weight_scale(const WeightView& w, int64_t n, int64_t k);

}  // namespace di::kernels
