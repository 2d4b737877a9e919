// See deferred_downloads.h.
#include "backend/cuda/deferred_downloads.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace di::backend::cuda {

DeferredDownloads::~DeferredDownloads() {
  for (const Pending& p : pending_) {
    (void)cudaEventSynchronize(p.done);
    (void)cudaEventDestroy(p.done);
  }
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  if (stage_) (void)cudaFreeHost(stage_);
}

Expected<uint64_t> DeferredDownloads::start(void* host,
                                            const void* dev,
                                            size_t bytes,
                                            cudaStream_t stream) {
  if (bytes > kStageBytes) return invalid_argument("deferred download larger than its stage");
  if (!stage_) {
    void* p = nullptr;
    DI_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, kStageBytes, cudaHostAllocDefault));
    stage_ = static_cast<uint8_t*>(p);
  }
  const size_t need = (bytes + 255) & ~size_t{255};
  // A ring: the copy goes at head_ (wrapping to 0) once the oldest pending copies have left the
  // bytes it needs.
  auto overlaps_pending = [&](size_t at) {
    for (const Pending& p : pending_) {
      if (at < p.at + ((p.bytes + 255) & ~size_t{255}) && p.at < at + need) return true;
    }
    return false;
  };
  size_t at = head_ + need <= kStageBytes ? head_ : 0;
  while (overlaps_pending(at)) DI_RETURN_IF_ERROR(collect_front());
  cudaEvent_t done = nullptr;
  if (!free_events_.empty()) {
    done = free_events_.back();
    free_events_.pop_back();
  } else {
    DI_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  cudaError_t e = cudaMemcpyAsync(stage_ + at, dev, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaEventRecord(done, stream);
  if (e != cudaSuccess) {
    free_events_.push_back(done);
    return cuda_status(e, "deferred download");
  }
  pending_.push_back(Pending{next_ticket_, at, bytes, host, done});
  head_ = at + need;
  return next_ticket_++;
}

Status DeferredDownloads::collect_front() {
  Pending p = pending_.front();
  pending_.pop_front();
  const cudaError_t e = cudaEventSynchronize(p.done);
  free_events_.push_back(p.done);
  DI_CUDA_RETURN_IF_ERROR(e);
  std::memcpy(p.host, stage_ + p.at, p.bytes);
  return {};
}

Status DeferredDownloads::wait(uint64_t ticket, bool* waited) {
  *waited = false;
  while (!pending_.empty() && pending_.front().ticket <= ticket) {
    *waited = true;
    DI_RETURN_IF_ERROR(collect_front());
  }
  return {};
}

}  // namespace di::backend::cuda
