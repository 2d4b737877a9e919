#include "model/forward_context.h"

namespace di::model {

std::vector<std::vector<int32_t>> RowLists::to_host() const {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(data.rows()));
  if (width == 0) return out;
  const std::vector<float> h = data.to_host();
  const int32_t* v = reinterpret_cast<const int32_t*>(h.data());
  for (size_t r = 0; r < out.size(); ++r) {
    const int32_t* row = v + static_cast<int64_t>(r) * width;
    out[r].assign(row, std::find(row, row + width, -1));
  }
  return out;
}

RowPageTables row_page_tables(const ForwardContext& ctx, int stream) {
  RowPageTables t;
  t.offset.resize(static_cast<size_t>(ctx.num_rows));
  for (size_t ch = 0; ch < ctx.chunks.size(); ++ch) {
    const CompressedStream& cs = ctx.chunks[ch].seq->streams[static_cast<size_t>(stream)];
    const int64_t row0 = ctx.chunk_row_begin[ch];
    const int64_t rows = static_cast<int64_t>(ctx.chunks[ch].tokens.size());
    std::fill_n(t.offset.begin() + row0, rows, static_cast<int64_t>(t.pages.size()));
    t.pages.insert(t.pages.end(), cs.pages.begin(), cs.pages.end());
    t.max_entries = std::max(t.max_entries, cs.num_entries);
  }
  return t;
}

}  // namespace di::model
