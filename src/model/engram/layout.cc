// See layout.h.
#include "model/engram/layout.h"

#include <limits>
#include <string>
#include <unordered_set>

#include "model/engram/primes.h"

namespace di::engram {

Expected<EngramLayout> EngramLayout::from_config(const EngramLayoutConfig& config) {
  if (config.max_ngram_size < 2) {
    return invalid_argument("engram layout: max_ngram_size must be >= 2, got " +
                            std::to_string(config.max_ngram_size));
  }
  if (config.n_heads < 1) {
    return invalid_argument("engram layout: n_heads must be >= 1, got " +
                            std::to_string(config.n_heads));
  }
  if (config.vocab_size < 1) {
    return invalid_argument("engram layout: vocab_size must be >= 1, got " +
                            std::to_string(config.vocab_size));
  }
  EngramLayout layout;
  layout.layer_ids = config.layer_ids;
  layout.max_ngram_size = config.max_ngram_size;
  layout.n_heads = config.n_heads;
  std::unordered_set<int64_t> seen;
  for (std::size_t layer = 0; layer < config.layer_ids.size(); ++layer) {
    std::vector<int64_t> primes;
    std::vector<int64_t> offsets;
    int64_t rows = 0;
    for (int32_t n = 2; n <= config.max_ngram_size; ++n) {
      int64_t current = config.vocab_size - 1;
      for (int32_t h = 0; h < config.n_heads; ++h) {
        DI_ASSIGN_OR_RETURN(current, find_next_prime(current, seen));
        seen.insert(current);
        if (rows > std::numeric_limits<int64_t>::max() - current) {
          return out_of_range("engram layout: table rows overflow int64");
        }
        primes.push_back(current);
        offsets.push_back(rows);
        rows += current;
      }
    }
    layout.primes.push_back(std::move(primes));
    layout.offsets.push_back(std::move(offsets));
    layout.table_rows.push_back(rows);
  }
  return layout;
}

}  // namespace di::engram
