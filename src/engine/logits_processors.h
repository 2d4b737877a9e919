// Logits processors applied before the sampling draw: repetition, presence and frequency
// penalties and logit bias; and logprobs (log-softmax, chosen token plus the top k). Each is a
// pure function of one row of logits and the sequence's own tokens, so a token's value never
// depends on the batch it was computed in.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace di::engine {

// logits: [vocab] fp32, modified in place. counts: [vocab] scratch, all zero on entry and exit
// (the caller keeps it to avoid a per-token allocation).
void apply_penalties(std::span<float> logits,
                     const SamplingParams& p,
                     std::span<const int32_t> prompt,
                     std::span<const int32_t> output,
                     std::vector<int32_t>& counts);

// Adds each bias to its token's logit (ids were validated against the vocabulary).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// log-softmax of `logits` in double precision, the chosen token's value and the top_k entries
// (most likely first, ties: lower id). ids: scratch.
TokenLogprobs compute_logprobs(std::span<const float> logits,
                               int32_t chosen,
                               int top_k,
                               std::vector<int32_t>& ids);

}  // namespace di::engine
