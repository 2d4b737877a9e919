#include "kernels/ref/hyper_connection.h"

#include <algorithm>
#include <cmath>

#include "kernels/ref/dot.h"
#include "tensor/numeric.h"

namespace di::kernels {

namespace {
float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
}  // namespace

void hc_mixes_token(const float* x,
                    int64_t hc_dim,
                    const float* fn,
                    const float* scale,
                    const float* base,
                    int hc,
                    int sinkhorn_iters,
                    float hc_eps,
                    float norm_eps,
                    backend::HcCoefficients* out) {
  const int mix = (2 + hc) * hc;
  *out = backend::HcCoefficients{};  // entries past hc stay zero (as the CUDA kernels leave them)
  const float rsqrt =
      1.0f / std::sqrt(sum_squares_f32(x, hc_dim) / static_cast<float>(hc_dim) + norm_eps);
  float m[(2 + backend::HcCoefficients::kMaxHc) * backend::HcCoefficients::kMaxHc];
  for (int j = 0; j < mix; ++j) m[j] = dot_f32(x, fn + j * hc_dim, hc_dim) * rsqrt;
  for (int i = 0; i < hc; ++i) {
    out->pre[i] = sigmoid(m[i] * scale[0] + base[i]) + hc_eps;
    out->post[i] = 2.0f * sigmoid(m[hc + i] * scale[1] + base[hc + i]);
  }
  float* c = out->comb;
  for (int i = 0; i < hc; ++i) {
    float row_max = -INFINITY;
    for (int j = 0; j < hc; ++j) {
      c[i * hc + j] = m[2 * hc + i * hc + j] * scale[2] + base[2 * hc + i * hc + j];
      row_max = std::max(row_max, c[i * hc + j]);
    }
    float row_sum = 0;
    for (int j = 0; j < hc; ++j) {
      c[i * hc + j] = std::exp(c[i * hc + j] - row_max);
      row_sum += c[i * hc + j];
    }
    for (int j = 0; j < hc; ++j) c[i * hc + j] = c[i * hc + j] / row_sum + hc_eps;
  }
  auto normalize_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      float col = 0;
      for (int i = 0; i < hc; ++i) col += c[i * hc + j];
      for (int i = 0; i < hc; ++i) c[i * hc + j] = c[i * hc + j] / (col + hc_eps);
    }
  };
  auto normalize_rows = [&] {
    for (int i = 0; i < hc; ++i) {
      float row = 0;
      for (int j = 0; j < hc; ++j) row += c[i * hc + j];
      for (int j = 0; j < hc; ++j) c[i * hc + j] = c[i * hc + j] / (row + hc_eps);
    }
  };
  normalize_cols();
  for (int it = 0; it < sinkhorn_iters - 1; ++it) {
    normalize_rows();
    normalize_cols();
  }
}

void hc_collapse_token(const float* x, const float* pre, int hc, int64_t dim, float* y) {
  for (int64_t d = 0; d < dim; ++d) {
    float s = 0;
    for (int k = 0; k < hc; ++k) s += pre[k] * x[k * dim + d];
    y[d] = round_bf16(s);
  }
}

void hc_expand_token(const float* y,
                     const float* residual,
                     const backend::HcCoefficients& c,
                     int hc,
                     int64_t dim,
                     float* out) {
  for (int j = 0; j < hc; ++j) {
    for (int64_t d = 0; d < dim; ++d) {
      float mixed = 0;
      for (int i = 0; i < hc; ++i) mixed += c.comb[i * hc + j] * residual[i * dim + d];
      out[j * dim + d] = round_bf16(c.post[j] * y[d] + mixed);
    }
  }
}

}  // namespace di::kernels
