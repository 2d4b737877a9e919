// The routed experts' CPU reference for the CUDA MoE tests: model/moe.cc's expert loop and
// combine with CpuOps (linear, swiglu, linear; experts in ascending index, then the shared row).
#pragma once

#include <vector>

#include "cuda_test_util.h"

namespace di::backend::testing {

struct MoeCase {
  int64_t tokens;
  int experts, topk;
  int64_t dim, inter;
  float limit;
};

// model/moe.cc's expert loop and combine, with CpuOps.
inline std::vector<float> cpu_moe(const CpuOps& ops,
                                  const MoeCase& c,
                                  const std::vector<float>& x,
                                  const std::vector<int32_t>& experts,
                                  const std::vector<float>& weights,
                                  const std::vector<RandomWeight>& w1,
                                  const std::vector<RandomWeight>& w3,
                                  const std::vector<RandomWeight>& w2,
                                  const std::vector<float>& shared) {
  std::vector<float> acc(static_cast<size_t>(c.tokens * c.dim), 0.0f);
  for (int e = 0; e < c.experts; ++e) {
    std::vector<int64_t> rows;
    std::vector<float> ws, xs;
    for (int64_t r = 0; r < c.tokens; ++r) {
      for (int k = 0; k < c.topk; ++k) {
        if (experts[static_cast<size_t>(r * c.topk + k)] != e) continue;
        rows.push_back(r);
        ws.push_back(weights[static_cast<size_t>(r * c.topk + k)]);
        xs.insert(xs.end(), x.begin() + r * c.dim, x.begin() + (r + 1) * c.dim);
      }
    }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    std::vector<float> g(static_cast<size_t>(n * c.inter)), u(g.size()), y(xs.size());
    ops.linear({xs.data(), n, c.dim}, w1[static_cast<size_t>(e)].view, {g.data(), n, c.inter},
               true);
    ops.linear({xs.data(), n, c.dim}, w3[static_cast<size_t>(e)].view, {u.data(), n, c.inter},
               true);
    ops.swiglu({g.data(), n, c.inter}, {u.data(), n, c.inter}, ws.data(), c.limit,
               {g.data(), n, c.inter});
    ops.linear({g.data(), n, c.inter}, w2[static_cast<size_t>(e)].view, {y.data(), n, c.dim}, true);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < c.dim; ++d) {
        acc[static_cast<size_t>(rows[static_cast<size_t>(i)] * c.dim + d)] +=
            y[static_cast<size_t>(i * c.dim + d)];
      }
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = round_bf16(acc[i] + shared[i]);
  return acc;
}

}  // namespace di::backend::testing
