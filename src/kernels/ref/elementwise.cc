#include "kernels/ref/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ref/dot.h"
#include "tensor/numeric.h"

namespace di::kernels {

void rms_norm_row(const float* x, int64_t n, const float* w, float eps, float* y) {
  const float var = sum_squares_f32(x, n) / static_cast<float>(n);
  const float r = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = round_bf16(w[i] * (x[i] * r));
}

void rope_row(float* x, int64_t position, const backend::RopeTable& table, bool inverse) {
  const float pos = static_cast<float>(position);
  for (size_t i = 0; i < table.inv_freq.size(); ++i) {
    const float angle = pos * table.inv_freq[i];
    const float c = std::cos(angle);
    const float s = inverse ? -std::sin(angle) : std::sin(angle);
    const float a = x[2 * i];
    const float b = x[2 * i + 1];
    x[2 * i] = round_bf16(a * c - b * s);
    x[2 * i + 1] = round_bf16(a * s + b * c);
  }
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

void swiglu_row(
    const float* g, const float* u, int64_t n, float row_weight, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float gate = g[i];
    float up = u[i];
    if (limit > 0) {
      up = std::clamp(up, -limit, limit);
      gate = std::min(gate, limit);
    }
    out[i] = round_bf16(row_weight * (silu(gate) * up));
  }
}

namespace {
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}
}  // namespace

void moe_route_row(const float* raw,
                   const float* bias,
                   const backend::RouteParams& p,
                   int32_t* experts,
                   float* weights) {
  const int n = p.num_experts;
  float scores[1024];
  float biased[1024];
  float max_score = -std::numeric_limits<float>::infinity();
  for (int e = 0; e < n; ++e) max_score = std::max(max_score, raw[e] / p.gate_temp);
  float softmax_sum = 0;
  for (int e = 0; e < n; ++e) {
    float s = raw[e] / p.gate_temp;
    switch (p.score_func) {
      case backend::ScoreFunc::kSqrtSoftplus:
        s = std::sqrt(softplus(s));
        break;
      case backend::ScoreFunc::kSigmoid:
        s = 1.0f / (1.0f + std::exp(-s));
        break;
      case backend::ScoreFunc::kSoftmax:
        s = std::exp(s - max_score);
        softmax_sum += s;
        break;
    }
    scores[e] = s;
  }
  if (p.score_func == backend::ScoreFunc::kSoftmax) {
    for (int e = 0; e < n; ++e) scores[e] /= softmax_sum;
  }
  for (int e = 0; e < n; ++e) biased[e] = scores[e] + (bias ? bias[e] : 0.0f);
  bool taken[1024] = {};
  for (int k = 0; k < p.topk; ++k) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      if (!taken[e] && (best < 0 || biased[e] > biased[best])) best = e;
    }
    taken[best] = true;
    experts[k] = best;
    weights[k] = scores[best];
  }
  if (p.norm_topk_prob && p.topk > 1) {
    float sum = 0;
    for (int k = 0; k < p.topk; ++k) sum += weights[k];
    for (int k = 0; k < p.topk; ++k) weights[k] /= (sum + 1e-20f);
  }
  for (int k = 0; k < p.topk; ++k) weights[k] *= p.route_scale;
}

void engram_gate_row(
    float* x, const float* kv, const float* qk_weight, int hc, int64_t dim, float eps) {
  const float* value = kv + hc * dim;
  // dim**-0.5 is a Python float in the reference, rounded to fp32 when it meets a tensor.
  const float inv_sqrt_dim = static_cast<float>(std::pow(static_cast<double>(dim), -0.5));
  for (int k = 0; k < hc; ++k) {
    float* xk = x + k * dim;
    const float* key = kv + k * dim;
    const float* wk = qk_weight + k * dim;
    float h_ms = sum_squares_f32(xk, dim) / static_cast<float>(dim);
    float k_ms = sum_squares_f32(key, dim) / static_cast<float>(dim);
    float rstd = (1.0f / std::sqrt(h_ms + eps)) * (1.0f / std::sqrt(k_ms + eps));
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t d = 0;
    for (; d + 8 <= dim; d += 8) {
      for (int j = 0; j < 8; ++j) lane[j] += (xk[d + j] * wk[d + j]) * key[d + j];
    }
    float dot = combine_lanes(lane);
    for (; d < dim; ++d) dot += (xk[d] * wk[d]) * key[d];
    dot = dot * rstd * inv_sqrt_dim;
    float mag = std::sqrt(std::max(std::fabs(dot), 1e-6f));
    float gate = 1.0f / (1.0f + std::exp(-std::copysign(mag, dot)));
    for (int64_t i = 0; i < dim; ++i) xk[i] = round_bf16(xk[i] + gate * value[i]);
  }
}

void softmax_pool_channels(
    const float* kv, const float* score, int group, int64_t dim, float* out) {
  for (int64_t d = 0; d < dim; ++d) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < group; ++i) mx = std::max(mx, score[i * dim + d]);
    float e[64];
    float sum = 0;
    for (int i = 0; i < group; ++i) {
      e[i] = std::exp(score[i * dim + d] - mx);
      sum += e[i];
    }
    float acc = 0;
    for (int i = 0; i < group; ++i) acc += kv[i * dim + d] * (e[i] / sum);
    out[d] = acc;
  }
}

}  // namespace di::kernels
