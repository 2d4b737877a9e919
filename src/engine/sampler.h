// Token sampling from fp32 logits: greedy at temperature 0, otherwise temperature, top-k, top-p
// and min-p filtering, then a draw from a counter-based generator keyed by (seed, stream,
// position), so a seeded request samples the same tokens alone, in any batch and in another run.
// The draw is kernels/ref/sample_row.h's (a Gumbel race over exactly defined cuts), which a
// backend's Ops::sample_rows computes bitwise alike.
// Penalties, logit bias and logprobs live in engine/logits_processors.h; Sampler chains them.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/token_constraint.h"
#include "kernels/ref/sample_row.h"
#include "util/status.h"

namespace di::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
  // Penalties with vLLM's meaning: repetition over prompt and output tokens (divides positive
  // logits, multiplies negative ones); presence and frequency over output tokens only.
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
  bool logprobs = false;                              // report the chosen token's logprob
  int top_logprobs = 0;  // and the k most likely tokens' (needs logprobs)
};

// Checks ranges; `vocab_size` > 0 also checks logit_bias ids.
Status validate_sampling(const SamplingParams& p, int32_t vocab_size = 0);

// Greedy with nothing that reads or changes the logits (penalties, bias, logprobs): the token is
// the logits' argmax, which a device backend reduces without copying the row to the host.
inline bool greedy_argmax_only(const SamplingParams& p) {
  return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f && p.logit_bias.empty() && !p.logprobs;
}

// A uniform double in [0, 1) from (seed, stream, position); stream separates choices (n > 1).
double counter_uniform(uint64_t seed, uint64_t stream, uint64_t position);

// Filters and draws only (no penalties): the building block Sampler uses. Allocates scratch.
int32_t sample_token(std::span<const float> logits,
                     const SamplingParams& p,
                     uint64_t stream,
                     uint64_t position);

struct TokenLogprobs {
  bool present = false;
  float logprob = 0.0f;                        // of the chosen token
  std::vector<std::pair<int32_t, float>> top;  // most likely first (ties: lower id)
};

struct SampleResult {
  int32_t token = 0;
  TokenLogprobs logprobs;
};

// Reusable scratch so the engine's decode loop does not allocate per token once warm.
// Not thread-safe; the engine owns one.
class Sampler {
 public:
  // logits: [vocab] fp32, modified in place (penalties and bias applied). `prompt` and `output`
  // are the sequence's tokens so far (penalties). Logprobs are log-softmax of the penalized,
  // biased logits before temperature and filtering (what the model proposed, as vLLM reports).
  // A constraint masks the logits after penalties and bias and then sees the drawn token.
  SampleResult sample(std::span<float> logits,
                      const SamplingParams& p,
                      std::span<const int32_t> prompt,
                      std::span<const int32_t> output,
                      uint64_t stream,
                      uint64_t position,
                      TokenConstraint* constraint = nullptr);

  // The filtering draw with this object's scratch (sample_token without allocation).
  int32_t draw(std::span<const float> logits,
               const SamplingParams& p,
               uint64_t stream,
               uint64_t position);

 private:
  std::vector<int32_t> ids_;
  kernels::sample::DrawScratch draw_;
  std::vector<int32_t> counts_;  // [vocab] output-token counts, zeroed after each use
};

}  // namespace di::engine
