#include "kernels/ref/kv_codec.h"

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

// The scale and the codes as in fake_quant_row_fp8 (quant.cc), one 32-block.
void encode_fp8_block(const float* x, uint8_t* codes, uint8_t* scale) {
  const float amax = std::max(block_amax(x, 32), 1e-4f);
  const float s = pow2_ceil_scale(amax * (1.0f / kFp8Max));
  for (int i = 0; i < 32; ++i) codes[i] = float_to_e4m3(std::clamp(x[i] / s, -kFp8Max, kFp8Max));
  *scale = static_cast<uint8_t>(float_bits(s) >> 23);  // a power of two: its exponent byte
}

// As fake_quant_row_fp4 with e4m3 scales, one 16-block; codes[i] holds dims 2i and 2i+1.
void encode_fp4_block(const float* x, uint8_t* codes, uint8_t* scale) {
  const float amax = std::max(block_amax(x, 16), 6.0f * std::ldexp(1.0f, -9));
  const float s = round_e4m3(amax / kFp4Max);
  for (int i = 0; i < 8; ++i) {
    const uint8_t lo = float_to_e2m1(std::clamp(x[2 * i] / s, -kFp4Max, kFp4Max));
    const uint8_t hi = float_to_e2m1(std::clamp(x[2 * i + 1] / s, -kFp4Max, kFp4Max));
    codes[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
  *scale = float_to_e4m3(s);
}

}  // namespace

void encode_kv_row(const float* x, int64_t dim, backend::KvFormat format, uint8_t* row) {
  if (format == backend::KvFormat::kFp8) {
    for (int64_t b = 0; b < dim / 32; ++b)
      encode_fp8_block(x + 32 * b, row + 32 * b, row + dim + b);
  } else {
    for (int64_t b = 0; b < dim / 16; ++b)
      encode_fp4_block(x + 16 * b, row + 8 * b, row + dim / 2 + b);
  }
}

void decode_kv_row(const uint8_t* row, int64_t dim, backend::KvFormat format, float* out) {
  // The products are exact (at most 8 significant bits); round_bf16 keeps the fake
  // quantization's last step literally.
  if (format == backend::KvFormat::kFp8) {
    for (int64_t i = 0; i < dim; ++i)
      out[i] = round_bf16(e4m3_to_float(row[i]) * e8m0_to_float(row[dim + i / 32]));
  } else {
    for (int64_t i = 0; i < dim; ++i) {
      const uint8_t code = static_cast<uint8_t>((row[i / 2] >> (4 * (i % 2))) & 0xf);
      out[i] = round_bf16(e2m1_to_float(code) * e4m3_to_float(row[dim / 2 + i / 16]));
    }
  }
}

}  // namespace di::kernels
