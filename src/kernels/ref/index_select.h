// The indexer's choices with the reference's tie rules (Indexer.forward's topk over the scores,
// select_candidate_blocks): plain host functions that every backend's selection ops must match
// exactly. Ties go to the lower index (torch.topk on the reference's device orders equal scores
// by index; the CPU backend fixed that rule and the golden checks hold it); -0.0 equals +0.0.
#pragma once

#include <cstdint>
#include <vector>

namespace di::kernels {

// The `topk` best of scores[0, visible) (larger first, ties and -inf: lower index first), in
// ascending index order; min(topk, visible) entries.
std::vector<int32_t> select_topk(const float* scores, int64_t visible, int topk);

// Blocks of `block_size` entries of scores[0, visible) ranked by their best score, the block
// holding the newest visible entry pinned first; up to `topk_blocks` blocks with a score above
// -inf (ties: lower block first), in ascending order.
std::vector<int32_t> select_candidate_blocks(const float* scores,
                                             int64_t visible,
                                             int block_size,
                                             int topk_blocks);

}  // namespace di::kernels
