#include "engine/device_sampling.h"

#include "kernels/ref/sample_math.h"

namespace di::engine {

bool add_backend_sample_row(const SamplingParams& p,
                            std::span<const int32_t> prompt,
                            std::span<const int32_t> output,
                            uint64_t stream,
                            uint64_t position,
                            TokenConstraint* constraint,
                            int64_t vocab,
                            std::vector<int32_t>& counts,
                            kernels::sample::RowParams& out,
                            model::LogitsSelection& sel,
                            int64_t& mask_at) {
  kernels::sample::RowParams r;
  r.mask = -1;
  mask_at = -1;
  if (constraint) {
    const auto kind = constraint->bitmask_kind();
    if (kind == TokenConstraint::Mask::kUnsupported) return false;
    if (kind == TokenConstraint::Mask::kMask) {
      const size_t words = static_cast<size_t>(kernels::sample::mask_words(vocab));
      const size_t at = sel.masks.size();
      sel.masks.resize(at + words);
      r.mask = static_cast<int32_t>(at / words);
      mask_at = static_cast<int64_t>(at);
    }
  }
  r.key = kernels::sample::row_key(p.seed, stream, position);
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  // Penalty entries, as apply_penalties reads them: each distinct output token with its count,
  // then (repetition only) each prompt-only token with count 0. counts: -1 marks "listed".
  const bool rep = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  r.penalty_begin = static_cast<int32_t>(sel.penalty_tokens.size());
  if (rep || additive) {
    counts.resize(static_cast<size_t>(vocab), 0);
    for (int32_t t : output) ++counts[static_cast<size_t>(t)];
    for (int32_t t : output) {
      int32_t& c = counts[static_cast<size_t>(t)];
      if (c <= 0) continue;
      sel.penalty_tokens.push_back(t);
      sel.penalty_counts.push_back(c);
      c = -1;
    }
    if (rep) {
      for (int32_t t : prompt) {
        int32_t& c = counts[static_cast<size_t>(t)];
        if (c != 0) continue;
        sel.penalty_tokens.push_back(t);
        sel.penalty_counts.push_back(0);
        c = -1;
      }
    }
    for (int32_t t : output) counts[static_cast<size_t>(t)] = 0;
    for (int32_t t : prompt) counts[static_cast<size_t>(t)] = 0;
  }
  r.penalty_count = static_cast<int32_t>(sel.penalty_tokens.size()) - r.penalty_begin;
  r.bias_begin = static_cast<int32_t>(sel.bias_tokens.size());
  for (const auto& [id, b] : p.logit_bias) {
    sel.bias_tokens.push_back(id);
    sel.bias_values.push_back(b);
  }
  r.bias_count = static_cast<int32_t>(p.logit_bias.size());
  out = r;
  return true;
}

}  // namespace di::engine
