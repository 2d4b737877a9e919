// A borrowed view of one weight matrix in its checkpoint storage format (spec §1.9). The bytes
// usually point into a memory-mapped checkpoint and stay valid while the model lives.
#pragma once

#include <cstdint>

namespace di {

enum class WeightFormat {
  kBF16,  // data: [out, in] bf16
  kF32,   // data: [out, in] f32
  kFP8,   // data: [out, in] e4m3; scale: [ceil(out/32), ceil(in/32)] ue8m0 (one per 32x32 tile)
  kFP4,  // data: [out, in/2] packed e2m1 (even column in the low nibble); scale: [out, in/32] ue8m0
};

struct WeightView {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out_features = 0;
  int64_t in_features = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;  // null for kBF16 / kF32
  bool empty() const { return data == nullptr; }
};

// Contiguous row-major activations: [rows, cols] f32 (values are often bf16-exact).
struct RowsView {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float* row(int64_t r) const { return data + r * cols; }
};
struct ConstRowsView {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  ConstRowsView() = default;
  ConstRowsView(const float* d, int64_t r, int64_t c) : data(d), rows(r), cols(c) {}
  ConstRowsView(RowsView v) : data(v.data), rows(v.rows), cols(v.cols) {}  // NOLINT
  const float* row(int64_t r) const { return data + r * cols; }
};

}  // namespace di
