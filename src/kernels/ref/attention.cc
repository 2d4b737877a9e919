#include "kernels/ref/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ref/dot.h"
#include "tensor/numeric.h"

namespace di::kernels {

namespace {
constexpr int64_t kKeyBlock = 64;  // the kernel's block of gathered indices
}

void sparse_attention_query(const float* q,
                            int heads,
                            int dim,
                            const float* const* keys,
                            int64_t num_keys,
                            const float* sink,
                            float softmax_scale,
                            float* out) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> acc(static_cast<size_t>(dim));
  float s[kKeyBlock];
  for (int h = 0; h < heads; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * dim;
    std::fill(acc.begin(), acc.end(), 0.0f);
    float running_max = -1e30f;  // finite floor: a row without keys yields zeros, not NaN
    float sum_exp = 0.0f;
    for (int64_t b0 = 0; b0 < num_keys; b0 += kKeyBlock) {
      const int64_t nb = std::min(kKeyBlock, num_keys - b0);
      float block_max = neg_inf;
      for (int64_t i = 0; i < nb; ++i) {
        const float* k = keys[b0 + i];
        s[i] = k ? dot_f32(qh, k, dim) * softmax_scale : neg_inf;
        block_max = std::max(block_max, s[i]);
      }
      const float new_max = std::max(running_max, block_max);
      const float rescale = std::exp(running_max - new_max);
      float block_sum = 0.0f;
      for (int d = 0; d < dim; ++d) acc[d] *= rescale;
      for (int64_t i = 0; i < nb; ++i) {
        const float p = std::exp(s[i] - new_max);
        block_sum += p;
        const float* k = keys[b0 + i];
        if (!k) continue;
        const float pb = round_bf16(p);
        for (int d = 0; d < dim; ++d) acc[d] += pb * k[d];
      }
      sum_exp = sum_exp * rescale + block_sum;
      running_max = new_max;
    }
    sum_exp += std::exp(sink[h] - running_max);
    float* oh = out + static_cast<int64_t>(h) * dim;
    for (int d = 0; d < dim; ++d) oh[d] = round_bf16(acc[d] / sum_exp);
  }
}

void index_scores_query(const float* q,
                        const float* w,
                        int heads,
                        int dim,
                        const float* const* keys,
                        int64_t num_keys,
                        int64_t num_visible,
                        float* scores) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < num_keys; ++s) {
    if (s >= num_visible) {
      scores[s] = neg_inf;
      continue;
    }
    float total = 0.0f;
    for (int h = 0; h < heads; ++h) {
      float dot = round_bf16(dot_f32(q + static_cast<int64_t>(h) * dim, keys[s], dim));
      float relu = std::max(dot, 0.0f);
      total += round_bf16(relu * w[h]);
    }
    scores[s] = round_bf16(total);
  }
}

}  // namespace di::kernels
