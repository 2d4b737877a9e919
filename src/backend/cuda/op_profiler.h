// Per-op timing of CudaOps for `bench step --profile-ops`: an event pair around each op's enqueued
// work (device time) and the host's time enqueuing it. Events are recorded on the op stream and
// read only in take(), which waits for the stream: profiling adds two event records per op and
// nothing else to the step it measures. An op's own time includes what nests inside it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/ops.h"

namespace di::backend::cuda {

class OpProfiler {
 public:
  OpProfiler() = default;
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
    for (const Record& r : records_) {
      (void)cudaEventDestroy(r.start);
      (void)cudaEventDestroy(r.end);
    }
  }

  // Marks the start of op `name` on `stream`; begin/end pairs nest (an op's weight upload).
  Status begin(std::string name, cudaStream_t stream) {
    Record r;
    r.op = std::move(name);
    r.host_start = std::chrono::steady_clock::now();
    DI_ASSIGN_OR_RETURN(r.start, event());
    DI_ASSIGN_OR_RETURN(r.end, event());
    DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.start, stream));
    open_.push_back(records_.size());
    records_.push_back(std::move(r));
    return {};
  }
  Status end(cudaStream_t stream) {
    Record& r = records_[open_.back()];
    open_.pop_back();
    DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.end, stream));
    r.host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.host_start)
            .count();
    return {};
  }

  // Totals per op name since the last take, sorted by device time (largest first).
  Expected<std::vector<OpTime>> take(cudaStream_t stream) {
    DI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::map<std::string, OpTime> by_op;
    for (const Record& r : records_) {
      float ms = 0;
      DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, r.start, r.end));
      OpTime& t = by_op[r.op];
      t.op = r.op;
      ++t.calls;
      t.device_ms += ms;
      t.host_ms += r.host_ms;
      free_.push_back(r.start);
      free_.push_back(r.end);
    }
    records_.clear();
    std::vector<OpTime> out;
    for (auto& [name, t] : by_op) out.push_back(t);
    std::sort(out.begin(), out.end(),
              [](const OpTime& a, const OpTime& b) { return a.device_ms > b.device_ms; });
    return out;
  }

 private:
  struct Record {
    std::string op;
    cudaEvent_t start = nullptr, end = nullptr;
    std::chrono::steady_clock::time_point host_start;
    double host_ms = 0;
  };
  Expected<cudaEvent_t> event() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    return e;
  }
  std::vector<Record> records_;
  std::vector<size_t> open_;  // records begun and not yet ended, innermost last
  std::vector<cudaEvent_t> free_;
};

}  // namespace di::backend::cuda
