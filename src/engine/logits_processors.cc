#include "engine/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace di::engine {

void apply_penalties(std::span<float> logits,
                     const SamplingParams& p,
                     std::span<const int32_t> prompt,
                     std::span<const int32_t> output,
                     std::vector<int32_t>& counts) {
  const float rep = p.repetition_penalty;
  if (rep != 1.0f) {
    // counts marks "seen" here (prompt or output); each token is penalized once.
    auto penalize = [&](int32_t t) {
      if (counts[t] != 0) return;
      counts[t] = 1;
      logits[t] = logits[t] > 0 ? logits[t] / rep : logits[t] * rep;
    };
    for (int32_t t : prompt) penalize(t);
    for (int32_t t : output) penalize(t);
    for (int32_t t : prompt) counts[t] = 0;
    for (int32_t t : output) counts[t] = 0;
  }
  if (p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  for (int32_t t : output) ++counts[t];
  for (int32_t t : output) {
    if (counts[t] == 0) continue;  // already applied for this token id
    logits[t] -= p.frequency_penalty * static_cast<float>(counts[t]) + p.presence_penalty;
    counts[t] = 0;
  }
}

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [id, b] : bias) logits[id] += b;
}

TokenLogprobs compute_logprobs(std::span<const float> logits,
                               int32_t chosen,
                               int top_k,
                               std::vector<int32_t>& ids) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double log_z = mx + std::log(sum);
  TokenLogprobs out;
  out.present = true;
  out.logprob = static_cast<float>(logits[chosen] - log_z);
  if (top_k <= 0) return out;
  const int32_t V = static_cast<int32_t>(logits.size());
  const int32_t k = std::min(top_k, V);
  ids.resize(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int32_t i = 0; i < k; ++i) {
    // Tokens a constraint ruled out (-inf) are no alternatives: the list ends before them.
    if (!std::isfinite(logits[ids[i]])) break;
    out.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - log_z));
  }
  return out;
}

}  // namespace di::engine
