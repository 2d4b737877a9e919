#include "kernels/ref/quant.h"

#include <algorithm>
#include <cmath>

#include "tensor/numeric.h"

namespace di::kernels {

namespace {
float block_amax(const float* x, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}
}  // namespace

void quantize_row_fp8(const float* x, int64_t n, int block, float* q, float* scales) {
  const float inv_max = 1.0f / kFp8Max;  // the kernel multiplies by an fp32 reciprocal
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    float amax = std::max(block_amax(xb, block), 1e-4f);
    float s = pow2_ceil_scale(amax * inv_max);
    scales[b] = s;
    for (int i = 0; i < block; ++i) {
      float v = std::clamp(xb[i] / s, -kFp8Max, kFp8Max);
      q[b * block + i] = round_e4m3(v);
    }
  }
}

void fake_quant_row_fp8(float* x, int64_t n, int block) {
  const float inv_max = 1.0f / kFp8Max;
  for (int64_t b = 0; b < n / block; ++b) {
    float* xb = x + b * block;
    float amax = std::max(block_amax(xb, block), 1e-4f);
    float s = pow2_ceil_scale(amax * inv_max);
    for (int i = 0; i < block; ++i) {
      float v = std::clamp(xb[i] / s, -kFp8Max, kFp8Max);
      xb[i] = round_bf16(round_e4m3(v) * s);
    }
  }
}

void fake_quant_row_fp4(float* x, int64_t n, backend::Fp4ScaleKind kind) {
  const bool e4m3_scales = kind == backend::Fp4ScaleKind::kE4m3Block16;
  const int block = e4m3_scales ? 16 : 32;
  const float inv_max = 1.0f / kFp4Max;
  for (int64_t b = 0; b < n / block; ++b) {
    float* xb = x + b * block;
    float amax = block_amax(xb, block);
    float s;
    if (e4m3_scales) {
      amax = std::max(amax, 6.0f * std::ldexp(1.0f, -9));
      s = round_e4m3(amax / kFp4Max);
    } else {
      amax = std::max(amax, 6.0f * std::ldexp(1.0f, -126));
      s = pow2_ceil_scale(amax * inv_max);
    }
    for (int i = 0; i < block; ++i) {
      float v = std::clamp(xb[i] / s, -kFp4Max, kFp4Max);
      xb[i] = round_bf16(round_e2m1(v) * s);
    }
  }
}

}  // namespace di::kernels
