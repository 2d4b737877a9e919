// CpuOps' selections: the indexer's (kernels/ref/index_select.h per row, written as fixed-width
// lists), greedy sampling's argmax and sampling's draw (kernels/ref/sample_row.h per row).
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "kernels/ref/index_select.h"
#include "kernels/ref/sample_row.h"

namespace di::backend {

namespace {

void write_list(const std::vector<int32_t>& list, int width, int32_t* out) {
  const int n = std::min(width, static_cast<int>(list.size()));
  std::copy_n(list.begin(), n, out);
  std::fill(out + n, out + width, -1);
}

}  // namespace

void CpuOps::index_topk(const IndexTopkArgs& a) const {
  pool_.parallel_for(a.num_queries, 1, [&](int64_t b, int64_t e) {
    std::vector<float> masked;
    for (int64_t t = b; t < e; ++t) {
      const float* s = a.scores + t * a.num_keys;
      const int64_t vis = std::min(a.num_visible[t], a.num_keys);
      if (a.blocks) {
        const int32_t* blocks = a.blocks + t * a.num_blocks;
        const int32_t* end = blocks + a.num_blocks;
        masked.assign(s, s + vis);
        for (int64_t i = 0; i < vis; ++i) {
          if (!std::binary_search(blocks, std::find(blocks, end, -1),
                                  static_cast<int32_t>(i / a.block_size))) {
            masked[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
          }
        }
        s = masked.data();
      }
      write_list(kernels::select_topk(s, vis, a.topk), a.width, a.selected + t * a.width);
    }
  });
}

void CpuOps::candidate_blocks(const CandidateBlockArgs& a) const {
  pool_.parallel_for(a.num_queries, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t vis = std::min(a.num_visible[t], a.num_keys);
      write_list(kernels::select_candidate_blocks(a.scores + t * a.num_keys, vis, a.block_size,
                                                  a.topk_blocks),
                 a.width, a.blocks + t * a.width);
    }
  });
}

void CpuOps::argmax_rows_to(ConstRowsView x, int32_t* out) const {
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* row = x.row(r);
    out[r] = static_cast<int32_t>(std::max_element(row, row + x.cols) - row);
  }
}

void CpuOps::sample_rows_to(RowsView x, const kernels::sample::RowsArgs& a, int32_t* out) const {
  pool_.parallel_for(x.rows, 1, [&](int64_t b, int64_t e) {
    kernels::sample::DrawScratch scratch;
    for (int64_t r = b; r < e; ++r) {
      const kernels::sample::RowParams& p = a.params[r];
      if (p.skip) {
        out[r] = -1;
        continue;
      }
      std::span<float> row(x.row(r), static_cast<size_t>(x.cols));
      kernels::sample::apply_processors(row, p, a);
      out[r] = kernels::sample::draw(row, p, scratch);
    }
  });
}

void CpuOps::paged_rows(const PagedRowsArgs& a) const {
  const int64_t per = a.entries_per_page;
  for (int64_t r = 0; r < a.num_rows; ++r) {
    for (int j = 0; j < a.width; ++j) {
      const int32_t e = a.entries[r * a.width + j];
      a.out[r * a.width + j] =
          e < 0 ? -1 : static_cast<int32_t>(a.pages[a.page_offset[r] + e / per] * per + e % per);
    }
  }
}

}  // namespace di::backend
