#include "kernels/ref/index_select.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace di::kernels {

std::vector<int32_t> select_topk(const float* scores, int64_t visible, int topk) {
  std::vector<int32_t> order(static_cast<size_t>(std::max<int64_t>(visible, 0)));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::clamp<int64_t>(topk, 0, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t x, int32_t y) {
    return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
  });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<int32_t> select_candidate_blocks(const float* scores,
                                             int64_t visible,
                                             int block_size,
                                             int topk_blocks) {
  const float inf = std::numeric_limits<float>::infinity();
  if (visible <= 0 || block_size <= 0) return {};
  const int64_t nb = (visible + block_size - 1) / block_size;
  std::vector<float> best(static_cast<size_t>(nb), -inf);
  for (int64_t s = 0; s < visible; ++s) {
    float& b = best[static_cast<size_t>(s / block_size)];
    b = std::max(b, scores[s]);
  }
  best[static_cast<size_t>(nb - 1)] = inf;
  std::vector<int32_t> order(static_cast<size_t>(nb));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return best[static_cast<size_t>(x)] > best[static_cast<size_t>(y)];
  });
  std::vector<int32_t> keep;
  for (int32_t b : order) {
    if (static_cast<int>(keep.size()) == topk_blocks || best[static_cast<size_t>(b)] == -inf) break;
    keep.push_back(b);
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

}  // namespace di::kernels
