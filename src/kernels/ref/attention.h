// Sparse sink attention and indexer scoring for one query, with the reference's numerics
// (kernel sparse_attn: online softmax over blocks of 64 keys, probabilities rounded to bf16 before
// the value product; Indexer.forward: bf16 scores).
#pragma once

#include <cstdint>

namespace di::kernels {

// out[h] = sum_i bf16(p_i) v_i / (sum_i p_i + exp(sink_h - max)) over the valid keys (non-null).
void sparse_attention_query(const float* q /*[heads, dim]*/,
                            int heads,
                            int dim,
                            const float* const* keys,
                            int64_t num_keys,
                            const float* sink,
                            float softmax_scale,
                            float* out /*[heads, dim]*/);

// scores[s] = bf16(sum_h bf16(w_h * relu(bf16(q_h . k_s)))) for s < num_visible, -inf after.
void index_scores_query(const float* q /*[heads, dim]*/,
                        const float* w /*[heads]*/,
                        int heads,
                        int dim,
                        const float* const* keys,
                        int64_t num_keys,
                        int64_t num_visible,
                        float* scores);

}  // namespace di::kernels
