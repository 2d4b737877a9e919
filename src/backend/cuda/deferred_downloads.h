// Device-to-host copies that the host collects later (Ops::download_async / wait_download): each
// goes into a pinned staging ring on the op stream with an event after it, and a wait blocks on
// that event alone, so work issued after the copy (the next step) keeps the device busy while the
// host waits. Tickets are handed out in stream order; waiting for one completes every earlier
// copy too (their events precede it on the stream).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "util/status.h"

namespace di::backend::cuda {

class DeferredDownloads {
 public:
  DeferredDownloads() = default;
  DeferredDownloads(const DeferredDownloads&) = delete;
  DeferredDownloads& operator=(const DeferredDownloads&) = delete;
  ~DeferredDownloads();

  // Largest copy that is staged; the caller downloads larger ones synchronously.
  static constexpr size_t kStageBytes = size_t{1} << 20;

  // Enqueues the copy of `bytes` (<= kStageBytes) from `dev` on `stream`; `host` receives them
  // in wait(). Waits for older copies first when the ring is full.
  Expected<uint64_t> start(void* host, const void* dev, size_t bytes, cudaStream_t stream);
  // Blocks until copy `ticket` (and every earlier one) landed, then moves them to their hosts.
  // A ticket already collected (or 0) returns at once; `waited` is set when it blocked.
  Status wait(uint64_t ticket, bool* waited);
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    uint64_t ticket;
    size_t at, bytes;
    void* host;
    cudaEvent_t done;
  };
  Status collect_front();  // the oldest copy: waits for its event and moves its bytes

  uint8_t* stage_ = nullptr;  // pinned
  size_t head_ = 0;           // next free byte of the ring (the oldest pending one is `tail`)
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  uint64_t next_ticket_ = 1;
};

}  // namespace di::backend::cuda
