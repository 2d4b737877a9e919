// CudaOps as backend::Memory: device memory from the stream-ordered pool, host transfers on the
// op stream (uploads through the pinned staging ring; downloads wait, counted in host_syncs).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/kernels.h"

namespace di::backend {

// --- backend memory: device memory from the stream-ordered pool ---

float* CudaOps::allocate(int64_t count) const {
  Impl& m = *impl_;
  float* p = nullptr;
  auto body = [&]() -> Status {
    const size_t bytes = sizeof(float) * static_cast<size_t>(std::max<int64_t>(count, 1));
    if (m.capturing) {
      const size_t need = (bytes + 255) & ~size_t{255};
      if (m.region_head + need <= Impl::kRegionBytes) {
        p = reinterpret_cast<float*>(m.region + m.region_head);
        m.region_head += need;
        ++m.region_live;
        m.capture_allocs.push_back(p);
        return {};
      }
      DI_RETURN_IF_ERROR(m.interrupt_capture());  // too large to record: the rest runs eagerly
    }
    void* raw = nullptr;
    DI_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&raw, bytes, m.stream));
    p = static_cast<float*>(raw);
    return {};
  };
  // Nothing for the device to run: the idle clock's gap goes on (device_work false).
  m.run("allocate", body, nullptr, /*device_work=*/false);
  return p;
}

void CudaOps::deallocate(float* p) const {
  if (!p) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.in_region(p)) {  // a segment's buffer: the region is reset by the next capture
    --m.region_live;
    auto it = std::find(m.capture_allocs.begin(), m.capture_allocs.end(), p);
    if (it != m.capture_allocs.end()) m.capture_allocs.erase(it);
    return;
  }
  if (m.capturing) {
    // Freeing memory from before the capture: a replay would not free it again.
    if (Status s = m.interrupt_capture(); !s.ok() && m.error.ok()) {
      m.error = s.with_context("cuda deallocate");
    }
  }
  if (m.side_open) {  // either line may still use it: freed at the join
    m.deferred_frees.push_back(p);
    return;
  }
  (void)cudaFreeAsync(p, m.stream);
}

void CudaOps::upload(const float* host, float* dst, int64_t count) const {
  Impl& m = *impl_;
  m.run("upload", [&]() -> Status {
    if (count <= 0 || !dst) return {};
    return m.copy_in(dst, host, sizeof(float) * static_cast<size_t>(count));
  });
}

void CudaOps::download(const float* src, float* host, int64_t count) const {
  Impl& m = *impl_;
  m.run("download", [&]() -> Status {
    if (count <= 0) return {};
    if (!src) return Status(StatusCode::kInternal, "download from a null buffer");
    DI_RETURN_IF_ERROR(m.interrupt_capture());
    DI_RETURN_IF_ERROR(m.join_side());  // the data may come from either line
    m.note_wait_begin();
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, src, sizeof(float) * static_cast<size_t>(count),
                                            cudaMemcpyDeviceToHost, m.stream));
    return m.sync();
  });
}

uint64_t CudaOps::download_async(const float* src, float* host, int64_t count) const {
  Impl& m = *impl_;
  uint64_t ticket = 0;
  m.run("download_async", [&]() -> Status {
    if (count <= 0) return {};
    if (!src) return Status(StatusCode::kInternal, "download from a null buffer");
    DI_ASSIGN_OR_RETURN(ticket,
                        m.download_later(host, src, sizeof(float) * static_cast<size_t>(count)));
    return {};
  });
  return ticket;
}

void CudaOps::wait_download(uint64_t ticket) const {
  Impl& m = *impl_;
  m.run(
      "wait_download", [&]() -> Status { return m.wait_download(ticket); }, nullptr,
      /*device_work=*/false);
}

void CudaOps::copy_2d(const float* src,
                      int64_t src_stride,
                      float* dst,
                      int64_t dst_stride,
                      int64_t width,
                      int64_t rows) const {
  Impl& m = *impl_;
  m.run("copy_2d", [&]() -> Status {
    if (width <= 0 || rows <= 0) return {};
    // Small copies as a kernel (the stream's programmatic overlap goes on across it), large ones
    // by the copy engine, whose bandwidth a kernel does not reach (and bench's floor measures).
    if (static_cast<uint64_t>(width * rows) * sizeof(float) < Impl::kKernelCopyMax) {
      DI_CUDA_RETURN_IF_ERROR(
          cuda::copy_2d(src, src_stride, dst, dst_stride, width, rows, m.stream));
      return {};
    }
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        dst, sizeof(float) * static_cast<size_t>(dst_stride), src,
        sizeof(float) * static_cast<size_t>(src_stride), sizeof(float) * static_cast<size_t>(width),
        static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, m.stream));
    return {};
  });
}

void CudaOps::fill(float* dst, float value, int64_t count) const {
  Impl& m = *impl_;
  m.run("fill", [&]() -> Status {
    if (count <= 0 || !dst) return {};
    const size_t bytes = sizeof(float) * static_cast<size_t>(count);
    if (bytes >= Impl::kKernelCopyMax && value == 0.0f && !std::signbit(value)) {
      DI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, m.stream));
      return {};
    }
    DI_CUDA_RETURN_IF_ERROR(cuda::fill(dst, value, count, m.stream));
    return {};
  });
}

void CudaOps::gather_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const {
  Impl& m = *impl_;
  m.run("gather_rows", [&]() -> Status {
    DI_ASSIGN_OR_RETURN(const int64_t* dr, m.upload(rows, static_cast<size_t>(dst.rows)));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::gather_rows(src.data, src.cols, dr, dst.rows, dst.data, m.stream));
    return {};
  });
}

void CudaOps::embed_rows(const WeightView& table,
                         const int32_t* tokens,
                         int copies,
                         RowsView out) const {
  Impl& m = *impl_;
  m.run("embed_rows", [&]() -> Status {
    if (out.rows <= 0) return {};
    if (table.format != WeightFormat::kBF16 && table.format != WeightFormat::kF32) {
      return Status(StatusCode::kInvalidArgument, "embed_rows: the table must be BF16 or F32");
    }
    DI_ASSIGN_OR_RETURN(cuda::DeviceWeight dw, m.weight(table));  // uploaded once, cached
    DI_CUDA_RETURN_IF_ERROR(
        cuda::embed_rows(dw, tokens, out.rows, copies, out.data, out.cols, m.stream));
    return {};
  });
}

void CudaOps::gather_fp8_rows(const Fp8RowTable& table, const int32_t* index, RowsView out) const {
  Impl& m = *impl_;
  m.run("gather_fp8_rows", [&]() -> Status {
    if (out.rows <= 0) return {};
    if (table.width % 32 != 0 || out.cols != table.width) {
      return Status(StatusCode::kInvalidArgument,
                    "gather_fp8_rows: width must be a multiple of 32 and equal out.cols");
    }
    DI_ASSIGN_OR_RETURN(const uint8_t* data,
                        m.cached_bytes(table.data, static_cast<size_t>(table.rows * table.width)));
    DI_ASSIGN_OR_RETURN(
        const uint8_t* scale,
        m.cached_bytes(table.scale, static_cast<size_t>(table.rows * (table.width / 32))));
    DI_CUDA_RETURN_IF_ERROR(
        cuda::gather_fp8_rows(data, scale, table.width, index, out.rows, out.data, m.stream));
    return {};
  });
}

void CudaOps::engram_hash_rows(const EngramHashArgs& a) const {
  Impl& m = *impl_;
  m.run("engram_hash_rows", [&]() -> Status {
    if (a.num_rows <= 0) return {};
    if (a.max_ngram < 2 || a.max_ngram > cuda::kEngramMaxNgram || a.heads < 1 || a.map_size < 1) {
      return Status(StatusCode::kInvalidArgument,
                    "engram_hash_rows: max_ngram must be in [2, 8], heads and the map non-empty");
    }
    const size_t n = static_cast<size_t>(a.num_rows);
    const size_t back = static_cast<size_t>(a.max_ngram - 1);
    const size_t buckets = back * static_cast<size_t>(a.heads);
    // The layer's constants (the token map, multipliers, primes, offsets) are uploaded once and
    // cached by address; the rows and their look-backs go up as one array (one upload kernel).
    auto cached = [&m](const auto* host, size_t count) {
      return m.cached_bytes(reinterpret_cast<const uint8_t*>(host), sizeof(*host) * count);
    };
    DI_ASSIGN_OR_RETURN(const uint8_t* map, cached(a.token_map, static_cast<size_t>(a.map_size)));
    DI_ASSIGN_OR_RETURN(const uint8_t* mult,
                        cached(a.multipliers, static_cast<size_t>(a.max_ngram)));
    DI_ASSIGN_OR_RETURN(const uint8_t* primes, cached(a.primes, buckets));
    DI_ASSIGN_OR_RETURN(const uint8_t* offsets, cached(a.offsets, buckets));
    std::vector<int32_t> rows_back(n * (1 + back));
    for (size_t i = 0; i < n; ++i) {
      if (a.rows[i] < 0 || a.rows[i] > std::numeric_limits<int32_t>::max()) {
        return Status(StatusCode::kInvalidArgument, "engram_hash_rows: a row out of range");
      }
      rows_back[i] = static_cast<int32_t>(a.rows[i]);
    }
    std::copy_n(a.look_back, n * back, rows_back.begin() + static_cast<std::ptrdiff_t>(n));
    DI_ASSIGN_OR_RETURN(const int32_t* packed, m.upload(rows_back.data(), rows_back.size()));
    DI_CUDA_RETURN_IF_ERROR(cuda::engram_hash_rows(
        a.tokens, packed, a.num_rows, packed + n, reinterpret_cast<const int32_t*>(map), a.map_size,
        a.max_ngram, a.heads, reinterpret_cast<const int64_t*>(mult),
        reinterpret_cast<const int64_t*>(primes), reinterpret_cast<const int64_t*>(offsets), a.pad,
        a.out, m.stream));
    return {};
  });
}

void CudaOps::copy_rows(const float* const* src,
                        float* const* dst,
                        int64_t n,
                        int64_t width) const {
  Impl& m = *impl_;
  m.run("copy_rows", [&]() -> Status {
    if (n <= 0 || width <= 0) return {};
    // Both pointer tables in one upload: each upload is a kernel of its own in the stream.
    std::vector<uintptr_t> tables(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      tables[static_cast<size_t>(i)] = reinterpret_cast<uintptr_t>(src[i]);
      tables[static_cast<size_t>(n + i)] = reinterpret_cast<uintptr_t>(dst[i]);
    }
    DI_ASSIGN_OR_RETURN(const uintptr_t* d, m.upload(tables.data(), tables.size()));
    const float* const* ds = reinterpret_cast<const float* const*>(d);
    float* const* dd = reinterpret_cast<float* const*>(d + n);
    DI_CUDA_RETURN_IF_ERROR(cuda::copy_rows(ds, dd, n, width, m.stream));
    return {};
  });
}

// --- op tracing (TracingOps) ---

bool CudaOps::record_checksum(const void* data, size_t bytes) const {
  Impl& m = *impl_;
  m.run("checksum", [&]() -> Status {
    DI_RETURN_IF_ERROR(m.interrupt_capture());  // each record's slot is its own
    if (!m.checksum_slots) {
      const size_t slot_bytes = sizeof(uint64_t) * Impl::kChecksumSlots;
      DI_ASSIGN_OR_RETURN(void* p, m.arena->alloc_persistent(slot_bytes));
      // Zeroed and waited for here, so that both lines see zeros whichever records first.
      DI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, slot_bytes, m.stream));
      DI_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
      m.checksum_slots = static_cast<uint64_t*>(p);
    }
    if (m.checksum_count >= Impl::kChecksumSlots) {
      return Status(StatusCode::kResourceExhausted, "op tracing: more than " +
                                                        std::to_string(Impl::kChecksumSlots) +
                                                        " checksums between two take_checksums");
    }
    DI_CUDA_RETURN_IF_ERROR(
        cuda::add_checksum(data, bytes, m.checksum_slots + m.checksum_count, m.stream));
    ++m.checksum_count;
    return {};
  });
  return true;
}

std::vector<uint64_t> CudaOps::take_checksums() const {
  Impl& m = *impl_;
  std::vector<uint64_t> out;
  m.run("take_checksums", [&]() -> Status {
    if (m.checksum_count == 0) return {};
    DI_RETURN_IF_ERROR(m.sync());  // joins a side line too
    std::vector<uint64_t> values(static_cast<size_t>(m.checksum_count));
    const size_t bytes = sizeof(uint64_t) * values.size();
    DI_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(values.data(), m.checksum_slots, bytes, cudaMemcpyDeviceToHost, m.stream));
    DI_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.checksum_slots, 0, bytes, m.stream));
    DI_RETURN_IF_ERROR(m.sync());
    m.checksum_count = 0;
    out = std::move(values);
    return {};
  });
  return out;
}

}  // namespace di::backend
