// `bench step --context N`: sequences that already hold N positions of state, without running
// the model over N tokens (a 64K-token prefill of 256 sequences would take the benchmark hours).
// The rows are random values stored through the backend's own KV writer, so every format and
// page mapping is the real one and a decode step reads exactly the bytes it would after a real
// prefill; only the values (and so the indexer's choices) are synthetic.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "model/config.h"
#include "model/state_pool.h"
#include "util/status.h"

namespace di::cli {

// Makes each of `seqs` (fresh) hold `tokens` positions: window rings, compressed KV and index keys
// of every stream, and the position counter. `tokens` must be a multiple of every compress ratio
// (no pending compressor group).
Status fill_synthetic_context(const backend::Ops& ops,
                              const model::ModelConfig& config,
                              model::StatePool& pool,
                              std::vector<model::SequenceState>& seqs,
                              int64_t tokens,
                              uint32_t seed);

// Bytes of stored state one decode step of one sequence at `context` positions must read: each
// layer's window rows and selected compressed rows, and every index key of each index source
// (fp32 rows in this engine's pool).
double decode_kv_bytes(const model::ModelConfig& config, int64_t context);

}  // namespace di::cli
