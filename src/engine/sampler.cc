#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/logits_processors.h"
#include "kernels/ref/sample_math.h"

namespace di::engine {

namespace {
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
  const uint64_t r = kernels::sample::row_key(seed, stream, position);
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
  // kernels/ref/sample_row.h's draw: the one Ops::sample_rows computes on a backend, bitwise.
  kernels::sample::RowParams r;
  r.key = kernels::sample::row_key(p.seed, stream, position);
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  return kernels::sample::draw(logits, r, draw_);
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
