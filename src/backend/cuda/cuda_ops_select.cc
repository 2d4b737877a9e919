// CudaOps' indexer selections (index_select.h): the scores stay on the device and only the
// host-known metadata (visible counts, page tables) is uploaded, so a decode step's top-k needs
// no wait.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/index_select.h"

namespace di::backend {

void CudaOps::index_topk(const IndexTopkArgs& a) const {
  Impl& m = *impl_;
  m.run("index_topk", [&]() -> Status {
    if (a.num_queries == 0) return {};
    DI_ASSIGN_OR_RETURN(const int64_t* dv,
                        m.upload(a.num_visible, static_cast<size_t>(a.num_queries)));
    DI_CUDA_RETURN_IF_ERROR(cuda::index_topk(a.scores, a.num_queries, a.num_keys, dv, a.topk,
                                             a.blocks, a.num_blocks, a.block_size, a.selected,
                                             a.width, m.stream));
    return {};
  });
}

void CudaOps::candidate_blocks(const CandidateBlockArgs& a) const {
  Impl& m = *impl_;
  m.run("candidate_blocks", [&]() -> Status {
    if (a.num_queries == 0) return {};
    if (a.block_size <= 0) {
      return Status(StatusCode::kInvalidArgument, "candidate_blocks: block_size must be > 0");
    }
    DI_ASSIGN_OR_RETURN(const int64_t* dv,
                        m.upload(a.num_visible, static_cast<size_t>(a.num_queries)));
    DI_ASSIGN_OR_RETURN(float* scratch,
                        m.scratch<float>(static_cast<size_t>(cuda::candidate_blocks_scratch(
                            a.num_queries, a.num_keys, a.block_size))));
    DI_CUDA_RETURN_IF_ERROR(cuda::candidate_blocks(a.scores, a.num_queries, a.num_keys, dv,
                                                   a.block_size, a.topk_blocks, scratch, a.blocks,
                                                   a.width, m.stream));
    return {};
  });
}

void CudaOps::argmax_rows_to(ConstRowsView x, int32_t* out) const {
  Impl& m = *impl_;
  m.run("argmax_rows", [&]() -> Status {
    if (x.rows == 0) return {};
    const size_t work_bytes = cuda::argmax_work_bytes(x.rows, x.cols);
    void* work = nullptr;
    if (work_bytes > 0) {
      DI_ASSIGN_OR_RETURN(int64_t * w, m.scratch<int64_t>((work_bytes + 7) / 8));
      work = w;
    }
    DI_CUDA_RETURN_IF_ERROR(cuda::argmax_rows(x.data, x.rows, x.cols, out, work, m.stream));
    return {};
  });
}

void CudaOps::paged_rows(const PagedRowsArgs& a) const {
  Impl& m = *impl_;
  m.run("paged_rows", [&]() -> Status {
    if (a.num_rows == 0 || a.width == 0) return {};
    const int32_t* dp = nullptr;  // no pages: every entry is -1
    if (a.num_pages > 0) {
      DI_ASSIGN_OR_RETURN(dp, m.upload(a.pages, static_cast<size_t>(a.num_pages)));
    }
    DI_ASSIGN_OR_RETURN(const int64_t* doff,
                        m.upload(a.page_offset, static_cast<size_t>(a.num_rows)));
    DI_CUDA_RETURN_IF_ERROR(cuda::paged_rows(a.entries, a.num_rows, a.width, dp, doff,
                                             a.entries_per_page, a.out, m.stream));
    return {};
  });
}

}  // namespace di::backend
