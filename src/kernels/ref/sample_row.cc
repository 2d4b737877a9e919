#include "kernels/ref/sample_row.h"

#include <algorithm>
#include <limits>

#include "kernels/ref/sample_math.h"
#include "kernels/ref/sample_rows_check.h"

namespace di::kernels::sample {

namespace {
bool allowed(const uint32_t* mask, int64_t t) {
  return mask == nullptr || ((mask[t / 32] >> (t % 32)) & 1u) != 0;
}
}  // namespace

// Declared in sample_rows_check.h.
bool args_in_range(const RowsArgs& a, int64_t rows, int64_t cols) {
  auto in = [](int64_t begin, int64_t count, int64_t size) {
    return begin >= 0 && count >= 0 && begin + count <= size;
  };
  for (int64_t r = 0; r < rows; ++r) {
    const RowParams& p = a.params[r];
    if (p.skip) continue;
    if (!in(p.penalty_begin, p.penalty_count, a.num_penalties) ||
        !in(p.bias_begin, p.bias_count, a.num_bias) || p.mask >= a.num_masks) {
      return false;
    }
  }
  for (int64_t e = 0; e < a.num_penalties; ++e) {
    if (a.penalty_tokens[e] < 0 || a.penalty_tokens[e] >= cols) return false;
  }
  for (int64_t e = 0; e < a.num_bias; ++e) {
    if (a.bias_tokens[e] < 0 || a.bias_tokens[e] >= cols) return false;
  }
  return true;
}

void apply_processors(std::span<float> logits, const RowParams& p, const RowsArgs& a) {
  const float rep = p.repetition_penalty;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  for (int32_t e = p.penalty_begin; e < p.penalty_begin + p.penalty_count; ++e) {
    const int32_t t = a.penalty_tokens[e], count = a.penalty_counts[e];
    float& l = logits[static_cast<size_t>(t)];
    if (rep != 1.0f) l = l > 0 ? l / rep : l * rep;
    if (additive && count > 0) {
      l -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
    }
  }
  for (int32_t e = p.bias_begin; e < p.bias_begin + p.bias_count; ++e) {
    logits[static_cast<size_t>(a.bias_tokens[e])] += a.bias_values[e];
  }
  if (p.mask < 0) return;
  const int64_t V = static_cast<int64_t>(logits.size());
  const uint32_t* mask = a.masks + p.mask * mask_words(V);
  for (int64_t t = 0; t < V; ++t) {
    if (!allowed(mask, t)) logits[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
  }
}

int32_t draw(std::span<const float> logits, const RowParams& p, DrawScratch& s) {
  const int32_t V = static_cast<int32_t>(logits.size());
  const int32_t first_max =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const float mx = logits[static_cast<size_t>(first_max)];
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (p.temperature == 0.0f || mx == neg_inf) return first_max;

  // Top-k: the k-th largest finite logit's key (duplicates counted).
  uint32_t cut = 0;
  s.keys.clear();
  for (float v : logits) {
    if (v != neg_inf) s.keys.push_back(order_key(v));
  }
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < s.keys.size()) {
    auto kth = s.keys.begin() + (p.top_k - 1);
    std::nth_element(s.keys.begin(), kth, s.keys.end(), std::greater<uint32_t>());
    cut = *kth;
  }
  // Top-p over the top-k tokens' exact fixed-point weights: the first distinct logit (from the
  // largest) at which the mass at or above it reaches top_p * total.
  if (p.top_p < 1.0f) {
    s.weighted.clear();
    uint64_t total = 0;
    for (float v : logits) {
      if (v == neg_inf || order_key(v) < cut) continue;
      const uint64_t w = weight(scaled(v, mx, p.temperature));
      s.weighted.emplace_back(order_key(v), w);
      total += w;
    }
    std::sort(s.weighted.begin(), s.weighted.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    const double target = static_cast<double>(p.top_p) * static_cast<double>(total);
    uint64_t mass = 0;
    for (size_t i = 0; i < s.weighted.size(); ++i) {
      mass += s.weighted[i].second;
      const bool group_end =
          i + 1 == s.weighted.size() || s.weighted[i + 1].first != s.weighted[i].first;
      if (group_end && static_cast<double>(mass) >= target) {
        cut = std::max(cut, s.weighted[i].first);
        break;
      }
    }
  }
  const double min_w = static_cast<double>(p.min_p) * kWeightOne;
  double best = -std::numeric_limits<double>::infinity();
  int32_t token = first_max;
  for (int32_t i = 0; i < V; ++i) {
    const float v = logits[static_cast<size_t>(i)];
    if (v == neg_inf || order_key(v) < cut) continue;
    const double d = scaled(v, mx, p.temperature);
    if (p.min_p > 0.0f && !(static_cast<double>(weight(d)) >= min_w)) continue;
    if (d < kRaceSkip) continue;
    const double score = d + gumbel(p.key, static_cast<uint32_t>(i));
    if (score > best) {
      best = score;
      token = i;
    }
  }
  return token;
}

}  // namespace di::kernels::sample
