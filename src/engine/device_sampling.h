// The engine's half of sampling on the backend: a request's sampling parameters, its token
// history and its constraint's allowed-token mask, turned into one row of Model::forward's
// LogitsSelection (kernels/ref/sample_row.h), so the backend draws the token the host sampler
// would and only that int comes back.
//
// Penalties travel as per-row lists of the sequence's distinct tokens with their output counts,
// rebuilt every step from the host's token history, rather than as per-request count tables kept
// on the device: the lists cost nothing for requests without penalties, need no device memory or
// lifetime per request, and stay right across preemption, recompute and replay (which rewrite the
// history) with no invalidation; their size is the number of distinct tokens (<= the sequence
// length; 8 bytes each).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "model/model.h"

namespace di::engine {

// Whether a request could sample on the backend at all (logprobs need the host's logits).
inline bool backend_samplable(const SamplingParams& p) {
  return !p.logprobs;
}

// Fills `out` and appends the row's lists to `sel` (penalties, bias, and room for the mask: the
// constraint writes it later, see LogitsSelection::fill_masks; `mask_at` gets its offset in
// sel.masks, or -1 without one); false, with `sel` unchanged, when the row must sample on the
// host (a constraint that cannot give a bitmask).
// counts: [vocab] scratch, zero on entry and exit.
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
                            int64_t& mask_at);

}  // namespace di::engine
