#include "model/forward_context.h"

namespace di::model {

std::vector<std::vector<int32_t>> RowLists::to_host() const {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(data.rows()));
  if (width == 0) return out;
  const std::vector<float> h = data.to_host();
  const int32_t* v = reinterpret_cast<const int32_t*>(h.data());
  for (size_t r = 0; r < out.size(); ++r) {
    const int32_t* row = v + static_cast<int64_t>(r) * width;
    out[r].assign(row, std::find(row, row + width, -1));
  }
  return out;
}

}  // namespace di::model
