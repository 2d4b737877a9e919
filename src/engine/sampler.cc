#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace di::engine {

namespace {
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

Status validate_sampling(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return invalid_argument("temperature must be a finite number >= 0");
  }
  if (p.top_k < 0) return invalid_argument("top_k must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid_argument("min_p must be in [0, 1]");
  return Status();
}

double counter_uniform(uint64_t seed, uint64_t stream, uint64_t position) {
  const uint64_t r = mix64(mix64(mix64(seed) ^ stream) ^ position);
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> logits,
                     const SamplingParams& p,
                     uint64_t stream,
                     uint64_t position) {
  const int32_t V = static_cast<int32_t>(logits.size());
  if (p.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates ordered by logit (ties: lower id), so the draw is independent of any batching.
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  const int32_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), by_logit);
  ids.resize(static_cast<size_t>(k));
  std::vector<double> prob(ids.size());
  const double top = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    prob[i] = std::exp((logits[ids[i]] - top) / p.temperature);
    sum += prob[i];
  }
  size_t keep = ids.size();
  double cum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    prob[i] /= sum;
    if (p.min_p > 0 && prob[i] < p.min_p * prob[0]) {
      keep = std::min(keep, i);
      break;
    }
    cum += prob[i];
    if (cum >= p.top_p) {
      keep = std::min(keep, i + 1);
      break;
    }
  }
  keep = std::max<size_t>(keep, 1);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  double u = counter_uniform(p.seed, stream, position) * total;
  for (size_t i = 0; i < keep; ++i) {
    u -= prob[i];
    if (u < 0) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace di::engine
