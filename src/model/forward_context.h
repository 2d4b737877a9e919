// What one forward call works on: the chunks of tokens of several sequences laid out as rows, and
// what attention layers hand down the stack within the call (the reference's
// SharedAttentionRuntime: each index source's selection and the candidate blocks), plus an optional
// trace for checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "model/state_pool.h"

namespace di::model {

struct SequenceChunk {
  SequenceState* seq = nullptr;
  std::vector<int32_t> tokens;  // processed at positions seq->num_tokens ...
  // SWA bounded replay (spec §1.2): rows at positions below this skip the layers after the last
  // KV source; only their window slots are then missing, which later queries treat as empty.
  // 0 (default) runs every layer on every row: exact.
  int64_t replay_from = 0;
  // A token chosen on the backend by an earlier forward and not downloaded yet (that forward's
  // LogitsSelection::device_tokens, one row of it): the chunk then holds exactly one token, whose
  // host value is not read. Model::commit_token records the id once it is known.
  const int32_t* pending = nullptr;
};

// Decisions recorded for comparison with the reference (golden checks, debugging).
struct ForwardTrace {
  std::map<int, std::vector<int32_t>> moe_experts;  // layer -> [rows, topk]
  std::map<int, std::vector<float>> moe_weights;    // layer -> [rows, topk]
  // layer -> [rows]: biased score of the k-th choice minus the (k+1)-th (the router's margin)
  std::map<int, std::vector<float>> moe_gap;
  std::map<int, std::vector<std::vector<int32_t>>> selections;        // index source -> per row
  std::map<int, std::vector<std::vector<int32_t>>> candidate_blocks;  // candidate source -> per row
};

// Per-row index lists in backend memory: [rows, width] int32 (in a float buffer), each row's
// entries first, then -1. The indexer writes them on the backend, so a decode step's selection
// and the attention key lists built from it never wait for the host.
struct RowLists {
  RowLists() = default;
  RowLists(const backend::Memory& memory, int64_t rows, int width)
      : data(memory, rows, std::max(width, 1)), width(width) {}
  int32_t* row(int64_t r) const { return reinterpret_cast<int32_t*>(data.data()) + r * width; }
  // Host copy, each row without its -1 padding (traces and checks; a device backend waits).
  std::vector<std::vector<int32_t>> to_host() const;

  backend::Buffer data;
  int width = 0;
};

struct ForwardContext;
// ForwardContext::token_ids as ids.
const int32_t* token_ids(const ForwardContext& ctx);

// Every row's page table of one compressed stream, for ops that read paged rows of many sequences
// in one call: the chunks' tables concatenated, and where each row's table starts.
struct RowPageTables {
  std::vector<int32_t> pages;
  std::vector<int64_t> offset;  // per row
  int64_t max_entries = 0;      // the longest sequence's entries in the stream
};
RowPageTables row_page_tables(const ForwardContext& ctx, int stream);

struct ForwardContext {
  StatePool* pool = nullptr;
  std::vector<SequenceChunk> chunks;
  // Per row (rows are the chunks' tokens, concatenated in chunk order).
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  std::vector<int32_t> row_chunk;
  std::vector<int64_t> chunk_row_begin;       // first row of each chunk
  std::vector<int64_t> chunk_first_position;  // position of each chunk's first row
  int64_t num_rows = 0;
  // The rows' tokens in backend memory ([rows] int32 in a float buffer; pending rows copied from
  // the backend), which the embedding and the backend's Engram hashing read.
  backend::Buffer token_ids;
  std::vector<int64_t> pending_rows;       // rows whose token is pending (ascending)
  std::vector<int32_t> pending_look_back;  // [pending rows, max_ngram - 1] (with Engram)
  // Engram hash rows per engram layer: layer -> [rows, n_cols].
  std::map<int, std::vector<int64_t>> engram_hashes;
  std::vector<engram::NgramHistory> engram_next_history;  // per chunk, committed by end_forward
  // Published within the call: index source layer -> per row, the selected compressed entries in
  // ascending order; candidate blocks per row from the candidate source.
  std::map<int, RowLists> selections;
  RowLists candidate_blocks;
  // DSpark input: the mean over hc copies of each target layer's block input, [rows, n_t * dim].
  backend::Buffer main_hidden;  // backend memory
  ForwardTrace* trace = nullptr;
};

inline const int32_t* token_ids(const ForwardContext& ctx) {
  return reinterpret_cast<const int32_t*>(ctx.token_ids.data());
}

}  // namespace di::model
