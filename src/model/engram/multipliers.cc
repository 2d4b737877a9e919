// See multipliers.h.
#include "model/engram/multipliers.h"

#include <algorithm>
#include <limits>
#include <string>

#include "model/engram/numpy_rng.h"

namespace di::engram {
namespace {
constexpr int64_t kSeedStride = 10007;  // the reference's per-layer seed multiplier
}  // namespace

Expected<std::vector<int64_t>> hash_multipliers(int64_t layer_id,
                                                int32_t max_ngram_size,
                                                int64_t compressed_vocab_size) {
  if (layer_id < 0 || layer_id > std::numeric_limits<int64_t>::max() / kSeedStride) {
    return invalid_argument("engram multipliers: layer id out of range: " +
                            std::to_string(layer_id));
  }
  if (max_ngram_size < 1) return invalid_argument("engram multipliers: max_ngram_size < 1");
  if (compressed_vocab_size < 1) {
    return invalid_argument("engram multipliers: compressed_vocab_size must be >= 1, got " +
                            std::to_string(compressed_vocab_size));
  }
  const int64_t bound =
      std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2);
  Pcg64 rng = Pcg64::from_seed(static_cast<uint64_t>(kSeedStride * layer_id));
  DI_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                      integers_int64(rng, 0, bound, static_cast<std::size_t>(max_ngram_size)));
  // values < bound <= INT64_MAX / 2, so values * 2 + 1 cannot overflow.
  for (int64_t& v : values) v = v * 2 + 1;
  return values;
}

Expected<std::vector<std::vector<int64_t>>> hash_multipliers_for_layers(
    const std::vector<int64_t>& layer_ids, int32_t max_ngram_size, int64_t compressed_vocab_size) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t id : layer_ids) {
    DI_ASSIGN_OR_RETURN(std::vector<int64_t> m,
                        hash_multipliers(id, max_ngram_size, compressed_vocab_size));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace di::engram
