// A generation request as the engine sees it (token ids only; text, chat and stop strings are the
// api layer's business) and what the engine reports back per step. One request is one sequence:
// the api layer expands n > 1 into n requests that share the prompt and differ in `stream`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/token_constraint.h"

namespace di::engine {

using RequestId = int64_t;

enum class FinishReason {
  kNone,       // still running
  kLength,     // max_tokens reached
  kStop,       // a stop token id (or, decided by the api layer, a stop string)
  kCancelled,  // abort_request
  kError,      // could not be served (e.g. it alone does not fit the state pool)
};

const char* finish_reason_name(FinishReason r);

struct Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;  // token ids, at least one
  SamplingParams sampling;      // sampling.seed is final here (the api layer draws missing ones)
  uint64_t stream = 0;          // RNG stream: the choice index of an n > 1 request
  int max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // generation stops after emitting one of these
  int priority = 0;  // lower values are served first (as in vLLM); ties: arrival order
  // Structured output: masks each sampled position (null: unconstrained). Owned per sequence.
  std::shared_ptr<TokenConstraint> constraint;
};

// One token generated in a step, with its logprob data when requested.
struct TokenEvent {
  int32_t token = 0;
  TokenLogprobs logprobs;  // empty unless the request asked for logprobs
};

// What one step produced for one request.
struct RequestUpdate {
  RequestId id = 0;
  std::vector<TokenEvent> new_tokens;  // at most one per step today
  FinishReason finish = FinishReason::kNone;
  std::string error;  // for kError
  int64_t num_prompt_tokens = 0;
};

}  // namespace di::engine
