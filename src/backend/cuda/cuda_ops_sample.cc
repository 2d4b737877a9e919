// CudaOps::sample_rows: the rows' parameters, penalty and bias lists and allowed-token masks go up
// (host-known sizes), one kernel draws every row into backend memory, a team of CTAs per row as
// large as the batch leaves room for.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/sample_rows.h"
#include "kernels/ref/sample_math.h"
#include "kernels/ref/sample_rows_check.h"

namespace di::backend {

void CudaOps::sample_rows_to(RowsView x, const kernels::sample::RowsArgs& a, int32_t* out) const {
  Impl& m = *impl_;
  m.run("sample_rows", [&]() -> Status {
    if (x.rows == 0) return {};
    if (!kernels::sample::args_in_range(a, x.rows, x.cols)) {
      return Status(StatusCode::kInvalidArgument, "sample_rows: a list or mask out of range");
    }
    const size_t rows = static_cast<size_t>(x.rows);
    const size_t np = static_cast<size_t>(a.num_penalties), nb = static_cast<size_t>(a.num_bias);
    const size_t nm = static_cast<size_t>(a.num_masks * kernels::sample::mask_words(x.cols));
    cuda::SampleRowsDevice d;
    DI_ASSIGN_OR_RETURN(d.params, m.upload(a.params, rows));
    if (np > 0) {
      DI_ASSIGN_OR_RETURN(d.penalty_tokens, m.upload(a.penalty_tokens, np));
      DI_ASSIGN_OR_RETURN(d.penalty_counts, m.upload(a.penalty_counts, np));
    }
    if (nb > 0) {
      DI_ASSIGN_OR_RETURN(d.bias_tokens, m.upload(a.bias_tokens, nb));
      DI_ASSIGN_OR_RETURN(d.bias_values, m.upload(a.bias_values, nb));
    }
    if (nm > 0) {
      DI_ASSIGN_OR_RETURN(d.masks, m.upload(a.masks, nm));
    }
    if (!m.sample_limits) {
      cuda::SampleLimits limits;
      DI_CUDA_RETURN_IF_ERROR(cuda::sample_limits(&limits));
      m.sample_limits = limits;
    }
    cuda::SampleLaunch how;
    how.ranks = cuda::sample_ranks(x.rows, *m.sample_limits);
    DI_CUDA_RETURN_IF_ERROR(cuda::sample_rows(x.data, x.rows, x.cols, d, out, m.stream, how));
    return {};
  });
}

}  // namespace di::backend
