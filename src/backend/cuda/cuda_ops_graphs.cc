// Segments as CUDA graphs (Ops::begin_segment): a run of ops that the model marks as depending
// only on its key is issued eagerly the first time (weights and constants upload then), captured
// into a graph the second time and replayed from then on: one launch instead of one per kernel,
// and no host work for its ops. Anything a replay could not repeat ends the capture early (the
// part captured so far is launched and the run's remaining ops are issued eagerly) and the key
// stays eager: an upload from the staging ring (a replay would read whatever the slot holds
// then), a wait, a synchronous copy, a free of memory from before the capture, or an allocation
// that outlives the run. Buffers allocated during a capture come from one region of the arena
// (cuda_ops_impl.h), so replays need no allocation either.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"

namespace di::backend {

Status CudaOps::Impl::finish_capture(bool keep) {
  // A side line forked in the capture joins it before it ends (an unjoined stream fails the
  // capture); the rest of that side line, if its caller goes on, runs in line on the main stream.
  Status joined;
  if (side_open && side_in_capture) joined = join_side();
  capturing = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(main_stream, &graph);
  const bool clean = keep && !capture_dirty && capture_allocs.empty() && joined.ok();
  capture_allocs.clear();
  SegmentGraph& seg = segments[capture_key];
  seg.has_side = capture_has_side;
  capture_has_side = false;
  if (!clean) seg.eager_only = true;
  DI_RETURN_IF_ERROR(joined);
  DI_CUDA_RETURN_IF_ERROR(e);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  DI_CUDA_RETURN_IF_ERROR(ie);
  DI_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, main_stream));  // this run's own work
  if (clean) {
    seg.exec = exec;
  } else {
    retired.push_back(exec);  // may still run: destroyed after the next wait
  }
  return {};
}

void CudaOps::Impl::destroy_graphs() {
  if (capturing) {
    if (side_open && side_in_capture) (void)join_side();
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(main_stream, &g) == cudaSuccess && g) (void)cudaGraphDestroy(g);
    capturing = false;
  }
  if (side_stream) (void)cudaStreamSynchronize(side_stream);
  if (main_stream) (void)cudaStreamSynchronize(main_stream);
  for (auto& [key, seg] : segments) {
    if (seg.exec) (void)cudaGraphExecDestroy(seg.exec);
  }
  segments.clear();
  for (cudaGraphExec_t g : retired) (void)cudaGraphExecDestroy(g);
  retired.clear();
}

bool CudaOps::begin_segment(uint64_t key) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  // Profiling times every op with events: segments stay eager then, as they do after an error.
  if (!m.graphs || m.profiler || !m.error.ok() || m.capturing || m.on_side()) return true;
  auto it = m.segments.find(key);
  if (it == m.segments.end()) {
    if (m.segments.size() >= Impl::kMaxSegments) {
      ++m.segment_stats.eager;
      return true;
    }
    it = m.segments.emplace(key, Impl::SegmentGraph{}).first;
  }
  Impl::SegmentGraph& seg = it->second;
  if (seg.exec) {
    // Its graph forks into the side scratch, which an open side line is using.
    if (seg.has_side) {
      if (Status s = m.join_side(); !s.ok()) {
        m.error = s.with_context("cuda segment");
        return true;
      }
    }
    m.note_enqueue();
    if (const cudaError_t e = cudaGraphLaunch(seg.exec, m.stream); e != cudaSuccess) {
      m.error = cuda::cuda_status(e, "cudaGraphLaunch").with_context("cuda segment");
      return true;  // the caller's ops then do nothing: the error is latched
    }
    ++m.segment_stats.replayed;
    return false;
  }
  if (seg.eager_only || seg.runs++ == 0) {
    ++m.segment_stats.eager;
    return true;
  }
  // Buffers of an earlier capture still alive (one escaped its segment): the region cannot be
  // reused yet.
  if (m.region_live != 0) {
    ++m.segment_stats.eager;
    return true;
  }
  if (!m.region) {
    auto r = m.arena->alloc_persistent(Impl::kRegionBytes);
    if (!r) {  // no room next to the weights: segments stay eager
      m.graphs = false;
      ++m.segment_stats.eager;
      return true;
    }
    m.region = static_cast<uint8_t*>(*r);
  }
  m.region_head = 0;
  // The capture must not wrap the staging ring (a wrap waits): start it with room to spare.
  if (m.pinned_head > Impl::kPinnedBytes / 2) {
    if (Status s = m.sync(); !s.ok()) {
      m.error = s.with_context("cuda segment");
      return true;
    }
    m.pinned_head = 0;
  }
  // A side line open from before cannot be joined from inside the capture (its event lies
  // outside the graph): it joins here.
  if (Status s = m.join_side(); !s.ok()) {
    m.error = s.with_context("cuda segment");
    return true;
  }
  m.capture_has_side = false;
  m.note_enqueue();
  if (const cudaError_t e = cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeThreadLocal);
      e != cudaSuccess) {
    m.error = cuda::cuda_status(e, "cudaStreamBeginCapture").with_context("cuda segment");
    return true;
  }
  m.capturing = true;
  m.capture_dirty = false;
  m.capture_key = key;
  ++m.segment_stats.captured;
  return true;
}

void CudaOps::end_segment() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.capturing) return;
  if (Status s = m.finish_capture(true); !s.ok() && m.error.ok()) {
    m.error = s.with_context("cuda segment");
  }
}

Ops::SegmentStats CudaOps::segment_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->segment_stats;
}

}  // namespace di::backend
