#include "model/rope_tables.h"

#include <algorithm>
#include <cmath>

namespace di::model {

backend::RopeTable make_rope_table(
    int rope_dim, float base, int original_seq_len, float factor, int beta_fast, int beta_slow) {
  backend::RopeTable t;
  const int half = rope_dim / 2;
  t.inv_freq.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    // fp32 like torch: base ** (arange(0, dim, 2) / dim), then 1 / that.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    t.inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  if (original_seq_len > 0) {
    // YaRN: the dimension whose wavelength completes `rotations` turns over the training context.
    auto corrected_dim = [&](double rotations) {
      return rope_dim * std::log(original_seq_len / (rotations * 2 * M_PI)) /
             (2 * std::log(static_cast<double>(base)));
    };
    const double low = std::max(std::floor(corrected_dim(beta_fast)), 0.0);
    const double high =
        std::min(std::ceil(corrected_dim(beta_slow)), static_cast<double>(rope_dim - 1));
    const float span = static_cast<float>(std::max(high - low, 1e-3));
    for (int i = 0; i < half; ++i) {
      float ramp = (static_cast<float>(i) - static_cast<float>(low)) / span;
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      float& f = t.inv_freq[static_cast<size_t>(i)];
      f = f / factor * (1.0f - smooth) + f * smooth;
    }
  }
  return t;
}

backend::RopeTable rope_table_for_layer(const ModelConfig& c, int layer) {
  if (c.compress_ratios[layer] > 0) {
    return make_rope_table(c.rope_head_dim, c.compress_rope_theta, c.original_seq_len,
                           c.rope_factor, c.beta_fast, c.beta_slow);
  }
  return make_rope_table(c.rope_head_dim, c.rope_theta, 0, c.rope_factor, c.beta_fast, c.beta_slow);
}

}  // namespace di::model
