// SWA bounded replay (spec §1.2; ATOM bounded_replay.py): the layers after the last KV source
// (and the last Engram layer) only read the shared compressed KV and their own window, so for a
// prompt only the tail that future queries' windows (and DSpark's) can see needs them. Prefill
// runs those layers on the tail rows only; the first tail rows then see windows truncated at the
// replay start, the approximation vLLM and SGLang also make. `replay_from = 0` keeps it exact.
#include <algorithm>

#include "model/model.h"

namespace di::model {

namespace {

// The kept rows of per-row lists (backend memory stays where it is).
RowLists gather_lists(const backend::Memory& memory,
                      const RowLists& lists,
                      const std::vector<int64_t>& rows) {
  RowLists out(memory, static_cast<int64_t>(rows.size()), lists.width);
  if (lists.width > 0 && !rows.empty()) {
    memory.gather_rows(lists.data.view(), rows.data(), out.data.view());
  }
  return out;
}

}  // namespace

std::vector<int64_t> narrow_to_replay_tail(const backend::Memory& memory,
                                           ForwardContext& ctx,
                                           ForwardContext& tail) {
  std::vector<int64_t> kept;
  tail = ForwardContext();
  tail.pool = ctx.pool;
  tail.trace = ctx.trace;
  for (size_t c = 0; c < ctx.chunks.size(); ++c) {
    SequenceChunk& ch = ctx.chunks[c];
    const int64_t start = ctx.chunk_first_position[c];
    const int64_t len = static_cast<int64_t>(ch.tokens.size());
    const int64_t from = std::clamp(ch.replay_from, start, start + len);
    // Window slots of skipped positions are never written for the late layers.
    if (from > start) ch.seq->late_valid_from = std::max(ch.seq->late_valid_from, from);
    SequenceChunk part{ch.seq, {ch.tokens.begin() + (from - start), ch.tokens.end()}, 0};
    tail.chunk_row_begin.push_back(static_cast<int64_t>(kept.size()));
    tail.chunk_first_position.push_back(from);
    for (int64_t i = from - start; i < len; ++i) {
      const int64_t row = ctx.chunk_row_begin[c] + i;
      kept.push_back(row);
      tail.tokens.push_back(ctx.tokens[static_cast<size_t>(row)]);
      tail.positions.push_back(ctx.positions[static_cast<size_t>(row)]);
      tail.row_chunk.push_back(static_cast<int32_t>(c));
    }
    tail.chunks.push_back(std::move(part));
  }
  tail.num_rows = static_cast<int64_t>(kept.size());
  for (const auto& [layer, lists] : ctx.selections)
    tail.selections[layer] = gather_lists(memory, lists, kept);
  tail.candidate_blocks = gather_lists(memory, ctx.candidate_blocks, kept);
  if (ctx.main_hidden.data() && !kept.empty()) {
    tail.main_hidden =
        backend::Buffer(memory, static_cast<int64_t>(kept.size()), ctx.main_hidden.cols());
    memory.gather_rows(ctx.main_hidden.view(), kept.data(), tail.main_hidden.view());
  }
  return kept;
}

}  // namespace di::model
