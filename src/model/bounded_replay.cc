// SWA bounded replay (spec §1.2; ATOM bounded_replay.py): the layers after the last KV source
// (and the last Engram layer) only read the shared compressed KV and their own window, so for a
// prompt only the tail that future queries' windows (and DSpark's) can see needs them. Prefill
// runs those layers on the tail rows only; the first tail rows then see windows truncated at the
// replay start, the approximation vLLM and SGLang also make. `replay_from = 0` keeps it exact.
#include <algorithm>

#include "model/model.h"

namespace di::model {

std::vector<float> gather_rows(const std::vector<float>& v,
                               int64_t width,
                               const std::vector<int64_t>& rows) {
  std::vector<float> out(rows.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(v.begin() + rows[i] * width, width, out.begin() + static_cast<int64_t>(i) * width);
  }
  return out;
}

std::vector<int64_t> narrow_to_replay_tail(ForwardContext& ctx, ForwardContext& tail) {
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
  for (const auto& [layer, rows] : ctx.selections) {
    auto& out = tail.selections[layer];
    for (int64_t r : kept) out.push_back(rows[static_cast<size_t>(r)]);
  }
  for (int64_t r : kept)
    tail.candidate_blocks.push_back(ctx.candidate_blocks[static_cast<size_t>(r)]);
  if (!ctx.main_hidden.empty()) {
    const int64_t width =
        static_cast<int64_t>(ctx.main_hidden.size()) / std::max<int64_t>(1, ctx.num_rows);
    tail.main_hidden = gather_rows(ctx.main_hidden, width, kept);
  }
  return kept;
}

}  // namespace di::model
