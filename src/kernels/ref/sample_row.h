// Token sampling of one logits row, the reference that the host sampler (engine/sampler.h) and
// Ops::sample_rows compute bitwise alike (sample_math.h holds the shared arithmetic).
//
// The draw, on the processed logits l (penalties, bias and the allowed-token mask applied; masked
// tokens are -inf and never drawn), mx = max l, d_i = (l_i - mx) / T in double:
//   T == 0: the first index of the largest l (std::max_element).
//   top-k (k > 0): keep l_i >= the k-th largest finite logit (duplicates counted; ties with it
//     are all kept).
//   top-p (p < 1): w_i = weight(d_i) (fixed point, exact integer sums); over the top-k tokens,
//     total = sum w; walking the distinct logits from the largest, the first one at which the
//     mass of the tokens at or above it reaches p * total (double compare) is the cut: keep
//     l_i >= it (again ties with the cut are all kept).
//   min-p (m > 0): keep w_i >= m * 2^32 (the top token weighs 2^32).
//   the token: argmax over the kept i of d_i + gumbel(key, i), the lowest index on ties
//     (a race of Gumbel-perturbed logits draws from softmax(l / T) restricted to the kept set).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace di::kernels::sample {

// One row's sampling parameters (plain data, uploaded as is by a device backend).
struct RowParams {
  uint64_t key = 0;          // row_key(seed, stream, position)
  float temperature = 0.0f;  // 0: argmax
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;          // 0: off
  int32_t penalty_begin = 0;  // entries [begin, begin + count) of RowsArgs' penalty lists
  int32_t penalty_count = 0;
  int32_t bias_begin = 0;  // entries of RowsArgs' bias lists, applied in order
  int32_t bias_count = 0;
  int32_t mask = -1;  // row of RowsArgs::masks; -1: every token allowed
  int32_t skip = 0;   // 1: leave the row alone (Ops::sample_rows writes -1)
};

// Every row's parameters and the lists they index (host memory).
struct RowsArgs {
  const RowParams* params = nullptr;  // [rows]
  // Penalty entries: distinct tokens of the sequence (prompt and output) with their count in the
  // output (0: prompt only). Repetition applies to every entry, presence and frequency to the
  // entries with a count, as engine/logits_processors.h does.
  const int32_t* penalty_tokens = nullptr;
  const int32_t* penalty_counts = nullptr;
  int64_t num_penalties = 0;
  const int32_t* bias_tokens = nullptr;  // (token, added to its logit), in order
  const float* bias_values = nullptr;
  int64_t num_bias = 0;
  const uint32_t* masks = nullptr;  // [num_masks, mask_words(vocab)]
  int64_t num_masks = 0;
};

// Penalties, then bias, then the mask (-inf for tokens not allowed), in place.
void apply_processors(std::span<float> logits, const RowParams& p, const RowsArgs& a);

// Reusable scratch for draw (no allocation once warm).
struct DrawScratch {
  std::vector<uint32_t> keys;
  std::vector<std::pair<uint32_t, uint64_t>> weighted;
};

// The draw above on processed logits.
int32_t draw(std::span<const float> logits, const RowParams& p, DrawScratch& s);

}  // namespace di::kernels::sample
