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
  const float amax = std::max(block_amax(x, 16), 6.0f * 0.001953125f);  // 6 * 2^-9
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
  // Every product is exact and already a bf16 value, so the fake quantization's final bf16
  // rounding is the identity here: an e4m3 value (4 significant bits) times a power of two at
  // least 2^-22, or an e2m1 value (2 bits, at least 0.5) times an e4m3 scale (4 bits, at least
  // 2^-9), has at most 6 significant bits and stays a normal float. Attention decodes every key
  // it reads, so this loop is kept to a table lookup and a multiply.
  static constexpr float kE2m1[16] = {0.f,  0.5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                      -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  const float* e4m3 = e4m3_table();
  if (format == backend::KvFormat::kFp8) {
    for (int64_t b = 0; b < dim / 32; ++b) {
      const float s = e8m0_to_float(row[dim + b]);
      for (int64_t i = 32 * b; i < 32 * b + 32; ++i) out[i] = e4m3[row[i]] * s;
    }
  } else {
    for (int64_t b = 0; b < dim / 16; ++b) {
      const float s = e4m3[row[dim / 2 + b]];
      for (int64_t i = 16 * b; i < 16 * b + 16; i += 2) {
        out[i] = kE2m1[row[i / 2] & 0xf] * s;
        out[i + 1] = kE2m1[row[i / 2] >> 4] * s;
      }
    }
  }
}

}  // namespace di::kernels
