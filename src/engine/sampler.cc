#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/logits_processors.h"

namespace di::engine {

namespace {
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool finite_in(float v, float lo, float hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}
}  // namespace

Status validate_sampling(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return invalid_argument("temperature must be a finite number >= 0");
  }
  if (p.top_k < 0) return invalid_argument("top_k must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid_argument("min_p must be in [0, 1]");
  if (!(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f)) {
    return invalid_argument("repetition_penalty must be a finite number > 0");
  }
  if (!finite_in(p.presence_penalty, -2.0f, 2.0f)) {
    return invalid_argument("presence_penalty must be in [-2, 2]");
  }
  if (!finite_in(p.frequency_penalty, -2.0f, 2.0f)) {
    return invalid_argument("frequency_penalty must be in [-2, 2]");
  }
  if (p.top_logprobs < 0 || p.top_logprobs > 20) {
    return invalid_argument("top_logprobs must be in [0, 20]");
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
      return invalid_argument("logit_bias: token id " + std::to_string(id) + " outside [0, " +
                              std::to_string(vocab_size) + ")");
    }
    if (!finite_in(bias, -100.0f, 100.0f)) {
      return invalid_argument("logit_bias: values must be in [-100, 100]");
    }
  }
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
  Sampler s;
  return s.draw(logits, p, stream, position);
}

int32_t Sampler::draw(std::span<const float> logits,
                      const SamplingParams& p,
                      uint64_t stream,
                      uint64_t position) {
  const int32_t V = static_cast<int32_t>(logits.size());
  if (p.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates ordered by logit (ties: lower id), so the draw is independent of any batching.
  ids_.resize(static_cast<size_t>(V));
  std::iota(ids_.begin(), ids_.end(), 0);
  const int32_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(), by_logit);
  prob_.resize(static_cast<size_t>(k));
  const double top = logits[ids_[0]];
  double sum = 0;
  for (int32_t i = 0; i < k; ++i) {
    prob_[i] = std::exp((logits[ids_[i]] - top) / p.temperature);
    sum += prob_[i];
  }
  size_t keep = static_cast<size_t>(k);
  double cum = 0;
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
    prob_[i] /= sum;
    if (p.min_p > 0 && prob_[i] < p.min_p * prob_[0]) {
      keep = std::min(keep, i);
      break;
    }
    cum += prob_[i];
    if (cum >= p.top_p) {
      keep = std::min(keep, i + 1);
      break;
    }
  }
  keep = std::max<size_t>(keep, 1);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob_[i];
  double u = counter_uniform(p.seed, stream, position) * total;
  for (size_t i = 0; i < keep; ++i) {
    u -= prob_[i];
    if (u < 0) return ids_[i];
  }
  return ids_[keep - 1];
}

SampleResult Sampler::sample(std::span<float> logits,
                             const SamplingParams& p,
                             std::span<const int32_t> prompt,
                             std::span<const int32_t> output,
                             uint64_t stream,
                             uint64_t position,
                             TokenConstraint* constraint) {
  counts_.resize(logits.size(), 0);
  apply_penalties(logits, p, prompt, output, counts_);
  apply_logit_bias(logits, p.logit_bias);
  if (constraint) constraint->apply(logits);
  SampleResult r;
  r.token = draw(logits, p, stream, position);
  if (constraint) constraint->accept(r.token);
  if (p.logprobs) r.logprobs = compute_logprobs(logits, r.token, p.top_logprobs, ids_);
  return r;
}

}  // namespace di::engine
