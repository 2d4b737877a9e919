// CudaOps' private state, shared by the files that implement its ops (cuda_ops.cc,
// cuda_ops_moe.cc): the stream, the arena, the weight cache and the latched error, plus the staging
// helpers.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/deferred_downloads.h"
#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/hc_mix_rows.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/cuda/op_profiler.h"
#include "backend/cuda/sample_rows.h"

namespace di::backend {

namespace cuda_ops_detail {

// Rows up to which `linear` takes the weight-streaming skinny GEMM (docs/benchmarks.md, session
// 4): on the exact path it beat the previous decode kernel at every measured shape up to 64 rows;
// the tensor-core path (about 37 us at 5120 x 5120 for 1-16 rows) is faster from 4 rows on.
inline constexpr int64_t kSkinnyRowsExact = 64;
// BF16/F32 products of fewer than 96 outputs take the lane tiles of hc_mix_rows from these rows
// and outputs x rows (measured: 32 x 5120 at 64 rows 24 vs 36 us for dense_staged; 16 x 5120 at
// 65 rows 23 vs 18, at 128 rows 23 vs 36).
inline constexpr int64_t kLaneTileMinRows = 65;
inline constexpr int64_t kLaneTileMinOutputRows = 2048;

inline size_t weight_data_bytes(const WeightView& w) {
  const int64_t n = w.out_features * w.in_features;
  switch (w.format) {
    case WeightFormat::kFP8:
      return static_cast<size_t>(n);
    case WeightFormat::kFP4:
      return static_cast<size_t>(n / 2);
    case WeightFormat::kBF16:
      return static_cast<size_t>(n) * 2;
    case WeightFormat::kF32:
      return static_cast<size_t>(n) * 4;
  }
  return 0;
}

inline size_t weight_scale_bytes(const WeightView& w) {
  if (w.format == WeightFormat::kFP8) {
    return static_cast<size_t>(((w.out_features + 31) / 32) * ((w.in_features + 31) / 32));
  }
  if (w.format == WeightFormat::kFP4)
    return static_cast<size_t>(w.out_features * (w.in_features / 32));
  return 0;
}

// A cheap fingerprint of a weight's bytes, so that a cached upload is not reused when a caller
// (a test, say) frees a weight and a new one lands at the same address.
inline uint64_t fingerprint(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  auto mix = [&](size_t i) { h = (h ^ p[i]) * 1099511628211ull; };
  for (size_t i = 0; i < std::min<size_t>(n, 256); ++i) mix(i);
  for (size_t i = n > 256 ? n - 256 : 0; i < n; ++i) mix(i);
  for (size_t i = 0; i < 64 && n > 0; ++i) mix((i * 0x9E3779B97F4A7C15ull) % n);
  return h;
}

struct CachedWeight {
  uint64_t print = 0;
  cuda::DeviceWeight dev;
};

}  // namespace cuda_ops_detail

struct CudaOps::Impl {
  std::mutex mu;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceArena> arena;
  std::unordered_map<const uint8_t*, cuda_ops_detail::CachedWeight> weights;
  // FP8 weights of the tensor path's bf16 wgmma GEMM in its lane-order layout (kernels.h,
  // wgmma_bf16_permute), cached apart from `weights`: an op that reads the original layout gets
  // its own upload (none does today for a weight that goes through `linear`).
  std::unordered_map<const uint8_t*, cuda_ops_detail::CachedWeight> wgmma_weights;
  // BF16 weights widened to fp32 for the lane-tiled products (widened_weight), keyed by their
  // cached upload's device address (a changed weight is uploaded to a new one).
  std::unordered_map<const uint8_t*, const float*> widened_weights;
  // Per MoE layer (keyed by its first expert's w1 bytes): device arrays of the experts' device
  // weight pointers, w1/w3/w2 data then scale, built once.
  std::unordered_map<const uint8_t*, const uint8_t* const*> expert_tables;
  CudaGemm gemm = CudaGemm::kExact;
  // The device's room for sampling teams (cuda_ops_sample.cc), queried at the first sample_rows.
  std::optional<cuda::SampleLimits> sample_limits;
  Status error;
  uint64_t host_syncs = 0;
  double host_wait_seconds = 0;
  // A device-to-host copy into pageable memory already blocks until it is done, so a wait is
  // timed from the first copy that precedes it.
  std::optional<std::chrono::steady_clock::time_point> wait_begin;
  // Device idle time after host waits (Ops::device_idle_seconds, CudaOptions::time_idle). An
  // event recorded before each wait marks where the queued work ends, one recorded at the first
  // enqueue after it where new work begins; the time between them is idle. Two end events take
  // turns, so that the one read at the next wait is not the one recorded for it.
  struct IdleClock {
    cudaEvent_t end[2] = {nullptr, nullptr};
    cudaEvent_t begin = nullptr;
    int last = -1;       // end[last]: the latest wait's (-1: no wait yet)
    bool armed = false;  // the next enqueue records `begin`
    bool open = false;   // `begin` follows end[last] and has not been read
    double seconds = 0;
  };
  std::optional<IdleClock> idle;
  std::unique_ptr<cuda::OpProfiler> profiler;  // when CudaOptions::profile_ops
  cuda::DeferredDownloads downloads;           // Ops::download_async
  // Op tracing (Ops::record_checksum): a sum per record, zeroed when allocated and after each
  // take_checksums; allocated at the first record.
  static constexpr int64_t kChecksumSlots = 16384;
  uint64_t* checksum_slots = nullptr;
  int64_t checksum_count = 0;
  // Pinned staging ring for per-call host data (metadata, small uploads). CUDA documents that a
  // cudaMemcpyAsync from pageable memory first synchronizes the stream, which would put a host
  // wait in front of every op with metadata; from pinned memory the copy is truly asynchronous.
  // The ring is reused after one stream synchronization when it wraps (rare: steps upload KBs).
  static constexpr size_t kPinnedBytes = size_t{64} << 20;
  static constexpr size_t kStageMax = size_t{4} << 20;  // larger uploads go pageable
  uint8_t* pinned = nullptr;
  uint8_t* pinned_device = nullptr;  // the ring as the device addresses it (mapped host memory)
  size_t pinned_head = 0;
  // Uploads up to this size from the ring are kernels that read the mapped ring
  // (cuda::upload_from_mapped); larger ones are copy-engine transfers.
  static constexpr size_t kMappedUploadMax = size_t{64} << 10;
  // Device copies and fills below this size are kernels (cuda::copy_2d, cuda::fill), larger ones
  // copy-engine transfers.
  static constexpr size_t kKernelCopyMax = size_t{8} << 20;

  // Segments recorded as CUDA graphs (cuda_ops_graphs.cc; Ops::begin_segment). A key's first run
  // is eager (it uploads the weights it meets), its second is captured, later ones replay.
  struct SegmentGraph {
    cudaGraphExec_t exec = nullptr;
    int runs = 0;
    bool eager_only = false;  // its capture met something a replay cannot repeat
    bool has_side = false;    // its graph forks a side line (which uses the side scratch)
  };
  static constexpr size_t kMaxSegments = 4096;  // past this, new keys run eagerly
  bool graphs = true;
  std::unordered_map<uint64_t, SegmentGraph> segments;
  bool capturing = false;
  bool capture_dirty = false;  // an upload, a foreign free or an escaping allocation
  uint64_t capture_key = 0;
  std::vector<void*> capture_allocs;  // allocated in the capture and not yet freed
  // Buffers a capture allocates come from this region (bump allocation, reset when a capture
  // starts with nothing of it alive): fixed addresses that every recorded segment shares, since
  // segments run one after another on the stream. Stream-ordered allocations inside a capture
  // would become graph allocations, whose memory each instantiated graph keeps for itself.
  static constexpr size_t kRegionBytes = size_t{256} << 20;
  uint8_t* region = nullptr;
  size_t region_head = 0;
  int64_t region_live = 0;
  bool in_region(const void* p) const {
    const auto* b = static_cast<const uint8_t*>(p);
    return region && b >= region && b < region + kRegionBytes;
  }
  std::vector<cudaGraphExec_t> retired;  // launched once; destroyed after the next sync

  // Side lines (Ops::begin_side, cuda_ops_side.cc). `stream` is the stream ops go to now: the
  // main stream, or the side stream between begin_side and end_side. While a side line is open
  // (until its join) nothing it may still use is reused: frees wait in `deferred_frees`, and its
  // ops take their scratch from a region of their own (bump allocation, reset at the join), since
  // a segment's graph replays with the main scratch addresses it was captured with.
  static constexpr size_t kSideScratchBytes = size_t{128} << 20;
  cudaStream_t main_stream = nullptr, side_stream = nullptr;
  cudaEvent_t fork_event = nullptr, join_event = nullptr;
  bool side_enabled = true;
  bool side_open = false;
  bool side_in_capture = false;   // forked inside the current capture: joined before it ends
  bool capture_has_side = false;  // the current capture forked a side line
  uint8_t* side_scratch = nullptr;
  size_t side_scratch_head = 0;
  std::vector<void*> deferred_frees;
  int64_t side_count = 0;
  bool on_side() const { return stream != main_stream; }
  // Opens a side line at this point of the main line (joins an open one first).
  Status fork_side();
  // The main line waits for the side line from here on; what the side line held is released.
  Status join_side();
  // For a join inside a kernel sequence (fused_moe's combine): records the side line's end into
  // join_event (null when no side line is open); the caller makes the main stream wait for it
  // and then calls finish_join.
  Expected<cudaEvent_t> side_ready();
  void finish_join();
  Expected<void*> side_scratch_alloc(size_t bytes);
  Ops::SegmentStats segment_stats;
  // Ends a capture: instantiates and launches what was captured (the work of this run so far),
  // keeps the graph for replays when `keep` and the capture stayed clean.
  Status finish_capture(bool keep);
  // Called before anything a capture cannot contain (a wait, a pageable copy, a synchronous
  // upload): the run's ops so far are launched and the rest of the run is eager.
  Status interrupt_capture() { return capturing ? finish_capture(false) : Status(); }
  void destroy_graphs();

  ~Impl() {
    destroy_graphs();
    if (main_stream) (void)cudaStreamDestroy(main_stream);
    if (side_stream) (void)cudaStreamDestroy(side_stream);
    if (fork_event) (void)cudaEventDestroy(fork_event);
    if (join_event) (void)cudaEventDestroy(join_event);
    if (pinned) (void)cudaFreeHost(pinned);
    if (idle) {
      for (cudaEvent_t e : {idle->end[0], idle->end[1], idle->begin}) {
        if (e) (void)cudaEventDestroy(e);
      }
    }
  }

  // The first work issued after a host wait (IdleClock): called before it is enqueued, outside
  // any capture (an event recorded into a capture would become a node of the graph).
  void note_enqueue() {
    if (!idle || !idle->armed || capturing) return;
    idle->armed = false;
    if (cudaEventRecord(idle->begin, stream) == cudaSuccess) idle->open = true;
  }

  // Enqueues host -> device `bytes` through the pinned ring when they fit.
  Status copy_in(void* dst, const void* host, size_t bytes) {
    if (bytes == 0) return {};
    const void* src = host;
    if (capturing) {
      // A replay would copy whatever the staging slot holds by then: this run stays eager.
      capture_dirty = true;
      const size_t need = (bytes + 255) & ~size_t{255};
      if (!pinned || bytes > kStageMax || pinned_head + need > kPinnedBytes) {
        DI_RETURN_IF_ERROR(interrupt_capture());
      }
    }
    if (pinned && bytes <= kStageMax) {
      const size_t need = (bytes + 255) & ~size_t{255};
      if (pinned_head + need > kPinnedBytes) {
        DI_RETURN_IF_ERROR(sync());
        pinned_head = 0;
      }
      std::memcpy(pinned + pinned_head, host, bytes);
      src = pinned + pinned_head;
      const size_t at = pinned_head;
      pinned_head += need;
      if (pinned_device && bytes <= kMappedUploadMax) {
        DI_CUDA_RETURN_IF_ERROR(cuda::upload_from_mapped(pinned_device + at, dst, bytes, stream));
        return {};
      }
    }
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return {};
  }

  template <class T>
  Expected<T*> scratch(size_t count) {
    const size_t bytes = sizeof(T) * std::max<size_t>(count, 1);
    DI_ASSIGN_OR_RETURN(void* p,
                        on_side() ? side_scratch_alloc(bytes) : arena->alloc_scratch(bytes));
    return static_cast<T*>(p);
  }
  template <class T>
  Expected<T*> upload(const T* host, size_t count) {
    DI_ASSIGN_OR_RETURN(T * d, scratch<T>(count));
    DI_RETURN_IF_ERROR(copy_in(d, host, sizeof(T) * count));
    return d;
  }
  // Copies host bytes that stay (a weight, a table) to the device, in order on the op stream.
  // Not cudaMemcpy: that runs on the legacy default stream, which the op streams
  // (cudaStreamNonBlocking) do not wait for, and from pageable memory it may return before its
  // DMA has landed. A kernel of the next op then read a partly uploaded weight: the first forward
  // of a process differed from run to run at full width (docs/notes/cuda-kernels.md, "The
  // determinism defect"). Never inside a capture (a replay would copy again): callers interrupt
  // it first.
  Status upload_persistent(void* dst, const void* host, size_t bytes) {
    if (bytes == 0) return {};
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream));
    return {};
  }
  template <class T>
  Status download(T* host, const T* dev, size_t count) {
    if (count == 0) return {};
    DI_RETURN_IF_ERROR(interrupt_capture());
    DI_RETURN_IF_ERROR(join_side());  // the data may come from either line
    note_wait_begin();
    DI_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, dev, sizeof(T) * count, cudaMemcpyDeviceToHost, stream));
    return {};
  }

  // Ops::download_async: staged and collected by wait_download; larger copies wait at once.
  Expected<uint64_t> download_later(void* host, const void* dev, size_t bytes) {
    DI_RETURN_IF_ERROR(interrupt_capture());
    DI_RETURN_IF_ERROR(join_side());  // the data may come from either line
    if (bytes > cuda::DeferredDownloads::kStageBytes) {
      DI_RETURN_IF_ERROR(
          download(static_cast<uint8_t*>(host), static_cast<const uint8_t*>(dev), bytes));
      DI_RETURN_IF_ERROR(sync());
      return uint64_t{0};
    }
    return downloads.start(host, dev, bytes, stream);
  }
  // Counted as a host wait when it blocked; the idle clock measures only full waits (sync).
  Status wait_download(uint64_t ticket) {
    const auto t0 = std::chrono::steady_clock::now();
    bool waited = false;
    Status s = downloads.wait(ticket, &waited);
    if (waited) {
      ++host_syncs;
      host_wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return s;
  }

  Expected<cuda::DeviceWeight> weight(const WeightView& w) {
    const size_t data_bytes = cuda_ops_detail::weight_data_bytes(w),
                 scale_bytes = cuda_ops_detail::weight_scale_bytes(w);
    const uint64_t print = cuda_ops_detail::fingerprint(w.data, data_bytes) ^
                           (scale_bytes ? cuda_ops_detail::fingerprint(w.scale, scale_bytes) : 0) ^
                           (static_cast<uint64_t>(w.out_features) << 20) ^
                           static_cast<uint64_t>(w.in_features) ^ static_cast<uint64_t>(w.format);
    auto it = weights.find(w.data);
    if (it != weights.end() && it->second.print == print) return it->second.dev;
    cuda::DeviceWeight d{w.format, w.out_features, w.in_features, nullptr, nullptr};
    DI_RETURN_IF_ERROR(interrupt_capture());  // the copies below are not captured
    DI_RETURN_IF_ERROR(join_side());          // a first use: the rest of the op runs in line
    if (profiler) {
      DI_RETURN_IF_ERROR(profiler->begin("weight_upload", stream));
    }
    DI_ASSIGN_OR_RETURN(void* data, arena->alloc_persistent(data_bytes));
    DI_RETURN_IF_ERROR(upload_persistent(data, w.data, data_bytes));
    d.data = static_cast<const uint8_t*>(data);
    if (scale_bytes) {
      DI_ASSIGN_OR_RETURN(void* scale, arena->alloc_persistent(scale_bytes));
      DI_RETURN_IF_ERROR(upload_persistent(scale, w.scale, scale_bytes));
      d.scale = static_cast<const uint8_t*>(scale);
    }
    weights[w.data] = {print, d};
    if (profiler) {
      DI_RETURN_IF_ERROR(profiler->end(stream));
    }
    return d;
  }

  // Host bytes that stay (a lookup table): uploaded once, cached by address and fingerprint.
  Expected<const uint8_t*> cached_bytes(const uint8_t* host, size_t n) {
    const uint64_t print = cuda_ops_detail::fingerprint(host, n) ^ (n << 8) ^ 0x7ab1e;
    auto it = weights.find(host);
    if (it != weights.end() && it->second.print == print) return it->second.dev.data;
    DI_RETURN_IF_ERROR(interrupt_capture());  // the copy below is not captured
    DI_RETURN_IF_ERROR(join_side());
    DI_ASSIGN_OR_RETURN(void* data, arena->alloc_persistent(std::max<size_t>(n, 1)));
    DI_RETURN_IF_ERROR(upload_persistent(data, host, n));
    cuda::DeviceWeight d{WeightFormat::kF32, 1, 0, static_cast<const uint8_t*>(data), nullptr};
    weights[host] = {print, d};
    return d.data;
  }

  // Derived device forms of a weight, built once and cached (cuda_ops_weights.cc).
  // A BF16 or F32 weight as fp32 (the upload itself for F32; BF16 widened once from its cached
  // upload `dw`, exactly): the lane-tiled products read fp32 rows.
  Expected<const float*> widened_weight(const WeightView& w, const cuda::DeviceWeight& dw);
  // The weight in the bf16 wgmma kernel's layout, uploaded once: rows go through scratch in chunks
  // and are permuted on the device, so the original layout never takes persistent memory.
  Expected<cuda::DeviceWeight> wgmma_weight(const WeightView& w);

  // Whether linear_pair takes one act_quant and one decode launch for w0 and w1: the tensor
  // path, both FP8 weights of the same K on the decode kernel (checked without uploading).
  bool pair_on_decode_kernel(int64_t rows, const WeightView& w0, const WeightView& w1) const {
    if (gemm != CudaGemm::kTensor || w0.in_features != w1.in_features) return false;
    const cuda::DeviceWeight d0{w0.format, w0.out_features, w0.in_features, nullptr, nullptr};
    const cuda::DeviceWeight d1{w1.format, w1.out_features, w1.in_features, nullptr, nullptr};
    return cuda::wgmma_bf16_applies(d0) && cuda::wgmma_bf16_applies(d1) &&
           cuda::bf16_decode_preferred(rows, d0) && cuda::bf16_decode_preferred(rows, d1);
  }

  // linear(x, w0) and linear(x, w1) where pair_on_decode_kernel holds: the same bits.
  Status linear_pair(const float* dx,
                     int64_t rows,
                     int64_t cols,
                     const WeightView& w0,
                     float* dy0,
                     const WeightView& w1,
                     float* dy1) {
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight d0, wgmma_weight(w0));
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight d1, wgmma_weight(w1));
    DI_ASSIGN_OR_RETURN(uint16_t * xb, scratch<uint16_t>(static_cast<size_t>(rows * cols)));
    DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8_bf16(dx, rows, cols, xb, stream));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::block_scaled_gemm_bf16_decode_pair(xb, rows, d0, dy0, d1, dy1, stream));
    return {};
  }

  // The tensor and fp8 paths' BF16 products (dense_bf16_tc's kernel family, the same bits for
  // every M) from fp32 x [rows, cols] that is bf16-valued: converted into scratch in the order the
  // picked kernel reads, the k32-logical one for the warp-specialised TMA tiles at many rows
  // (dense_bf16_wgmma_ws.cu), the natural one for the others.
  Status dense_bf16_tensor(const float* dx,
                           int64_t rows,
                           int64_t cols,
                           const cuda::DeviceWeight& dw,
                           int groups,
                           float* dy,
                           bool round) {
    DI_ASSIGN_OR_RETURN(uint16_t * xb, scratch<uint16_t>(static_cast<size_t>(rows * cols)));
    if (cuda::dense_bf16_ws_applies(rows, dw, groups)) {
      DI_CUDA_RETURN_IF_ERROR(cuda::f32_to_bf16_k32_logical(dx, rows, cols, xb, stream));
      DI_CUDA_RETURN_IF_ERROR(cuda::dense_bf16_wgmma_ws(xb, rows, dw, groups, dy, round, stream));
      return {};
    }
    DI_CUDA_RETURN_IF_ERROR(cuda::f32_to_bf16_bits(dx, rows * cols, xb, stream));
    DI_CUDA_RETURN_IF_ERROR(cuda::dense_bf16_tc(xb, rows, dw, groups, dy, round, stream));
    return {};
  }

  // y = x . w on device buffers (x [rows, cols], y [rows, w.out_features]), enqueued only.
  Status linear(
      const float* dx, int64_t rows, int64_t cols, const WeightView& w, float* dy, bool round) {
    if (gemm == CudaGemm::kTensor &&
        cuda::wgmma_bf16_applies({w.format, w.out_features, w.in_features, nullptr, nullptr})) {
      // sm_90, FP8, K % 128 == 0: one kernel family for every M (batch invariance).
      DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dw, wgmma_weight(w));
      const size_t in = static_cast<size_t>(rows * cols);
      DI_ASSIGN_OR_RETURN(uint16_t * xb, scratch<uint16_t>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8_bf16(dx, rows, cols, xb, stream));
      // Few rows and outputs: the decode kernel computes the block sums of all of K at once
      // (gemm_bf16_decode.cu; the same bits).
      DI_CUDA_RETURN_IF_ERROR(cuda::bf16_decode_preferred(rows, dw)
                                  ? cuda::block_scaled_gemm_bf16_decode(xb, rows, dw, dy, stream)
                                  : cuda::block_scaled_gemm_wgmma_bf16(xb, rows, dw, dy, stream));
      return {};
    }
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dw, weight(w));
    if (gemm != CudaGemm::kExact && cuda::dense_bf16_tc_applies(dw)) {
      // The large BF16 products (the heads, the compressor's wkv / wgate) on tensor cores for
      // every M (dense_bf16_tc.cu), on the tensor and fp8 paths. x is bf16 in the reference (the
      // normed hidden state), so the conversion is exact; only the fp32 summation order differs
      // from the CPU's.
      return dense_bf16_tensor(dx, rows, cols, dw, 1, dy, round);
    }
    if (w.format != WeightFormat::kFP8 && w.format != WeightFormat::kFP4) {
      // Few rows: from 16K outputs a thread per output (the tiled GEMV) keeps enough bytes in
      // flight; below 2K outputs a block per (output, row) over shared-memory copies does (also
      // for more rows of a few outputs, such as the router's 16 x 5120 at 64 rows: 45 us in
      // dense_gemm's 64 blocks, whose lanes are chains of K / 8 loads);
      // between them eight threads per output (dense_gemm). Many rows x outputs (or a long K):
      // the register-tiled GEMM (dense_tiled_applies). Same bits from all four.
      const bool aligned = reinterpret_cast<uintptr_t>(dx) % 16 == 0 && cols % 4 == 0;
      if (rows >= cuda_ops_detail::kLaneTileMinRows &&
          rows * dw.out_features >= cuda_ops_detail::kLaneTileMinOutputRows &&
          cuda::hc_mix_rows_supports(
              static_cast<int>(std::min<int64_t>(dw.out_features, 1 << 20)))) {
        // Few outputs at many rows (the indexer's weights_proj, the router): the register-tiled
        // lane chains of the mix products (hc_mix_rows.cu, the same bits) over the weight widened
        // to fp32 once. Measured: docs/benchmarks.md, session 25.
        DI_ASSIGN_OR_RETURN(const float* wf, widened_weight(w, dw));
        DI_CUDA_RETURN_IF_ERROR(cuda::hc_mix_rows(
            dx, rows, cols, wf, static_cast<int>(dw.out_features), dy, nullptr, round, stream));
        return {};
      }
      if (aligned && dw.out_features >= 16384 && cuda::dense_gemv_applies(rows, dw)) {
        DI_CUDA_RETURN_IF_ERROR(cuda::dense_gemv(dx, rows, dw, 1, dy, round, stream));
      } else if (aligned && dw.out_features >= 128 && dw.out_features < 2048 &&
                 cuda::dense_octets_applies(rows, dw)) {
        // BF16 weights at 1-8 rows from 128 outputs: an octet of threads per (output, row) over
        // shared copies of four weight rows (dense_octets.cu; same bits as dense_staged). Measured
        // faster at 512 x 5120 (10.7 vs 12.5 us at one row, 19 vs 73 at eight) and 128 x 512;
        // slower at 16 and 32 outputs (10.3 vs 4.4 us: four or eight blocks), which stay staged.
        DI_CUDA_RETURN_IF_ERROR(cuda::dense_octets(dx, rows, dw, dy, round, stream));
      } else if (aligned && dw.out_features < 2048 &&
                 (rows <= 8 || rows * dw.out_features <= 8192) &&
                 cuda::dense_staged_applies(rows, dw)) {
        DI_CUDA_RETURN_IF_ERROR(cuda::dense_staged(dx, rows, dw, dy, round, stream));
      } else if (cuda::dense_tiled_applies(rows, dw, 1)) {
        DI_CUDA_RETURN_IF_ERROR(cuda::dense_tiled(dx, rows, dw, 1, dy, round, stream));
      } else {
        DI_CUDA_RETURN_IF_ERROR(cuda::dense_gemm(dx, rows, dw, dy, round, stream));
      }
      return {};
    }
    const size_t in = static_cast<size_t>(rows * cols);
    DI_ASSIGN_OR_RETURN(float* sc, scratch<float>(in / 32));
    // (The fused decode kernel, gemm_tc_decode.cu, measured slower than these two launches at
    // one row; it is not used here, see docs/notes/cuda-kernels.md.) On the tensor path one kernel
    // family serves every M of a weight, so a row's bits never depend on its batch: the bf16 wgmma
    // kernel on sm_90 (K % 128 == 0), else the mma.sync one. The exact path and FP4 weights take
    // the weight-streaming skinny kernel for few rows: it is bitwise equal to the tiled one.
    const bool exact = gemm == CudaGemm::kExact || w.format == WeightFormat::kFP4;
    const bool skinny =
        exact && rows <= cuda_ops_detail::kSkinnyRowsExact && cuda::skinny_gemm_supports(rows, dw);
    if (!exact) {
      DI_ASSIGN_OR_RETURN(uint8_t * qa, scratch<uint8_t>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8_e4m3(dx, rows, cols, qa, sc, stream));
      DI_CUDA_RETURN_IF_ERROR(gemm == CudaGemm::kFp8
                                  ? cuda::block_scaled_gemm_wg(qa, sc, rows, dw, dy, stream)
                                  : cuda::block_scaled_gemm_tc(qa, sc, rows, dw, dy, stream));
    } else {
      DI_ASSIGN_OR_RETURN(float* q, scratch<float>(in));
      DI_CUDA_RETURN_IF_ERROR(cuda::quantize_fp8(dx, rows, cols, q, sc, stream));
      DI_CUDA_RETURN_IF_ERROR(skinny ? cuda::skinny_gemm(q, sc, rows, dw, dy, stream)
                                     : cuda::block_scaled_gemm(q, sc, rows, dw, dy, stream));
    }
    return {};
  }

  // A per-layer constant given as a host pointer (norm weights, sinks, biases, RoPE
  // frequencies): uploaded once and cached by address like the weights.
  Expected<const float*> constant(const float* host, int64_t count) {
    const WeightView w{WeightFormat::kF32, 1, count, reinterpret_cast<const uint8_t*>(host),
                       nullptr};
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight d, weight(w));
    return reinterpret_cast<const float*>(d.data);
  }

  // Enqueues one op (its metadata uploads and kernels; activations are already on the device),
  // releases its scratch, and latches the first error. No wait: the scratch is reused only by
  // later work on the same stream, and pageable uploads are staged before cudaMemcpyAsync
  // returns. When profiling, a product (`w` given) is listed with its weight's shape.
  // device_work: false for an op that gives the device nothing to run (an allocation), which
  // then does not end the idle clock's gap.
  template <class F>
  void run(const char* op, F&& body, const WeightView* w = nullptr, bool device_work = true) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error.ok()) return;
    const size_t mark = arena->scratch_mark();
    if (device_work) note_enqueue();
    Status s;
    if (profiler) {
      s = profiler->begin(w ? std::string(op) + " " + std::to_string(w->out_features) + "x" +
                                  std::to_string(w->in_features)
                            : std::string(op),
                          stream);
    }
    if (s.ok()) s = body();
    if (s.ok() && profiler) s = profiler->end(stream);
    arena->scratch_reset(mark);
    if (!s.ok()) error = s.with_context(std::string("cuda ") + op);
  }
  // Waits for the stream (a download); counted for the benchmark.
  void note_wait_begin() {
    if (!wait_begin) wait_begin = std::chrono::steady_clock::now();
  }
  Status sync() {
    DI_RETURN_IF_ERROR(interrupt_capture());
    DI_RETURN_IF_ERROR(join_side());  // the wait covers both lines
    ++host_syncs;
    note_wait_begin();
    const int end = idle ? (idle->last == 0 ? 1 : 0) : 0;
    const bool end_recorded = idle && cudaEventRecord(idle->end[end], stream) == cudaSuccess;
    const cudaError_t e = cudaStreamSynchronize(stream);
    host_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - *wait_begin).count();
    wait_begin.reset();
    if (e == cudaSuccess) {
      for (cudaGraphExec_t g : retired) (void)cudaGraphExecDestroy(g);
      retired.clear();
    }
    if (idle && e == cudaSuccess) {
      // Both events of the previous gap are complete now.
      float ms = 0;
      if (idle->open && idle->last >= 0 &&
          cudaEventElapsedTime(&ms, idle->end[idle->last], idle->begin) == cudaSuccess) {
        idle->seconds += 1e-3 * ms;
      }
      idle->open = false;
      idle->last = end_recorded ? end : -1;
      idle->armed = end_recorded;
    }
    return cuda::cuda_status(e, "cudaStreamSynchronize");
  }
};

}  // namespace di::backend
