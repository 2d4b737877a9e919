// Side lines (Ops::begin_side): independent work on a second stream. At a few rows a step is a
// chain of small kernels, each of which leaves most SMs idle for a launch-and-latency time of a few
// microseconds; work the model knows to be independent (the shared expert beside the routed
// ones, the compressor beside the indexer's queries, the draft head's KV beside the output head)
// then overlaps instead of waiting its turn.
//
// Ordering is by two events: the side stream waits for fork_event recorded on the main stream
// (so a side line sees everything issued before it), and the main stream waits for join_event
// recorded on the side stream. Inside a capture the same calls put a fork and a join into the
// graph (the side stream joins the capture through the event). Memory a side line may still use
// is never handed out again before the join: frees are deferred, and its per-op scratch comes from
// a region of its own, because a replayed graph writes the main scratch addresses it was captured
// with whatever else runs beside it.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"

namespace di::backend {

Status CudaOps::Impl::fork_side() {
  DI_RETURN_IF_ERROR(join_side());
  if (!side_scratch) {
    DI_ASSIGN_OR_RETURN(void* r, arena->alloc_persistent(kSideScratchBytes));
    side_scratch = static_cast<uint8_t*>(r);
  }
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(fork_event, main_stream));
  DI_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(side_stream, fork_event, 0));
  stream = side_stream;
  side_open = true;
  side_in_capture = capturing;
  if (capturing) capture_has_side = true;
  side_scratch_head = 0;
  ++side_count;
  return {};
}

Expected<cudaEvent_t> CudaOps::Impl::side_ready() {
  if (!side_open) return cudaEvent_t{nullptr};
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(join_event, side_stream));
  return join_event;
}

void CudaOps::Impl::finish_join() {
  stream = main_stream;
  side_open = false;
  side_in_capture = false;
  side_scratch_head = 0;
  // Ordered after both lines now (the main stream waits for the side one).
  for (void* p : deferred_frees) (void)cudaFreeAsync(p, main_stream);
  deferred_frees.clear();
}

Status CudaOps::Impl::join_side() {
  if (!side_open) return {};
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(join_event, side_stream));
  DI_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(main_stream, join_event, 0));
  finish_join();
  return {};
}

Expected<void*> CudaOps::Impl::side_scratch_alloc(size_t bytes) {
  const size_t need = (bytes + 255) & ~size_t{255};
  if (!side_scratch || side_scratch_head + need > kSideScratchBytes) {
    return Status(StatusCode::kResourceExhausted,
                  "side-line scratch: " + std::to_string(bytes) + " bytes do not fit in " +
                      std::to_string(kSideScratchBytes - side_scratch_head) + " left");
  }
  void* p = side_scratch + side_scratch_head;
  side_scratch_head += need;
  return p;
}

bool CudaOps::begin_side() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  // Profiling times ops one after another on one stream.
  if (!m.side_enabled || m.profiler || !m.error.ok()) return false;
  if (Status s = m.fork_side(); !s.ok()) {
    m.error = s.with_context("cuda side line");
    return false;
  }
  return true;
}

void CudaOps::end_side() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  m.stream = m.main_stream;
}

void CudaOps::join_side() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (Status s = m.join_side(); !s.ok() && m.error.ok()) m.error = s.with_context("cuda side line");
}

int64_t CudaOps::side_lines() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->side_count;
}

}  // namespace di::backend
