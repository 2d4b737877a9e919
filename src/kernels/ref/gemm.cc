#include "kernels/ref/gemm.h"

#include <vector>

#include "kernels/ref/dot.h"
#include "tensor/numeric.h"

namespace di::kernels {

namespace {
// Both e2m1 values of every packed byte (low nibble first), so a byte decodes with one load.
struct Fp4PairTable {
  float v[256][2];
  Fp4PairTable() {
    for (int b = 0; b < 256; ++b) {
      v[b][0] = e2m1_to_float(static_cast<uint8_t>(b & 0xf));
      v[b][1] = e2m1_to_float(static_cast<uint8_t>(b >> 4));
    }
  }
};
const Fp4PairTable& fp4_pairs() {
  static const Fp4PairTable table;
  return table;
}
}  // namespace

void decode_weight_row(const WeightView& w, int64_t n, int64_t k_begin, int64_t count, float* out) {
  switch (w.format) {
    case WeightFormat::kFP8: {
      const uint8_t* row = w.data + n * w.in_features + k_begin;
      const float* table = e4m3_table();
      for (int64_t i = 0; i < count; ++i) out[i] = table[row[i]];
      break;
    }
    case WeightFormat::kFP4: {
      const uint8_t* row = w.data + n * (w.in_features / 2);
      int64_t i = 0;
      if ((k_begin & 1) == 0) {
        const auto& pairs = fp4_pairs().v;
        const uint8_t* bytes = row + k_begin / 2;
        for (; i + 1 < count; i += 2) {
          const float* p = pairs[bytes[i / 2]];
          out[i] = p[0];
          out[i + 1] = p[1];
        }
      }
      for (; i < count; ++i) {
        const int64_t k = k_begin + i;
        const uint8_t byte = row[k / 2];
        out[i] = e2m1_to_float((k & 1) ? (byte >> 4) : (byte & 0xf));
      }
      break;
    }
    case WeightFormat::kBF16: {
      const uint16_t* row = reinterpret_cast<const uint16_t*>(w.data) + n * w.in_features + k_begin;
      for (int64_t i = 0; i < count; ++i) out[i] = bits_float(static_cast<uint32_t>(row[i]) << 16);
      break;
    }
    case WeightFormat::kF32: {
      const float* row = reinterpret_cast<const float*>(w.data) + n * w.in_features + k_begin;
      for (int64_t i = 0; i < count; ++i) out[i] = row[i];
      break;
    }
  }
}

float weight_scale(const WeightView& w, int64_t n, int64_t k) {
  if (w.format == WeightFormat::kFP8) {
    int64_t k_blocks = (w.in_features + 31) / 32;
    return e8m0_to_float(w.scale[(n / 32) * k_blocks + k / 32]);
  }
  return e8m0_to_float(w.scale[n * (w.in_features / 32) + k / 32]);
}

void block_scaled_gemm(
    const QuantizedRows& a, const WeightView& w, RowsView y, int64_t n_begin, int64_t n_end) {
  const int64_t K = w.in_features;
  const int64_t num_blocks = K / 32;
  std::vector<float> wrow(static_cast<size_t>(K));
  std::vector<float> acc(static_cast<size_t>(a.rows));
  for (int64_t n = n_begin; n < n_end; ++n) {
    decode_weight_row(w, n, 0, K, wrow.data());
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < num_blocks; ++b) {
      const float ws = weight_scale(w, n, b * 32);  // a power of two, exact in any order
      const float* wb = wrow.data() + b * 32;
      for (int64_t m = 0; m < a.rows; ++m) {
        float partial = dot_f32(a.values + m * K + b * 32, wb, 32);
        acc[m] += partial * a.scales[m * num_blocks + b] * ws;
      }
    }
    for (int64_t m = 0; m < a.rows; ++m) y.row(m)[n] = round_bf16(acc[m]);
  }
}

void dense_gemm(ConstRowsView x,
                const WeightView& w,
                RowsView y,
                bool round_bf16,
                int64_t n_begin,
                int64_t n_end) {
  const int64_t K = w.in_features;
  std::vector<float> wrow(static_cast<size_t>(K));
  for (int64_t n = n_begin; n < n_end; ++n) {
    if (w.format == WeightFormat::kBF16) {
      const uint16_t* wb = reinterpret_cast<const uint16_t*>(w.data) + n * K;
      for (int64_t m = 0; m < x.rows; ++m) {
        float v = dot_f32_bf16(x.row(m), wb, K);
        y.row(m)[n] = round_bf16 ? di::round_bf16(v) : v;
      }
      continue;
    }
    const float* wr;
    if (w.format == WeightFormat::kF32) {
      wr = reinterpret_cast<const float*>(w.data) + n * K;
    } else {
      decode_weight_row(w, n, 0, K, wrow.data());
      wr = wrow.data();
    }
    for (int64_t m = 0; m < x.rows; ++m) {
      float v = dot_f32(x.row(m), wr, K);
      y.row(m)[n] = round_bf16 ? di::round_bf16(v) : v;
    }
  }
}

}  // namespace di::kernels
