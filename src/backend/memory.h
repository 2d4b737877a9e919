// Backend memory: where activations and per-sequence state live while the backend computes on
// them (host memory for the CPU backend, device memory for a GPU one). The model never
// dereferences backend memory: it hands views of it to the ops, and moves data across only with
// upload/download, which a device backend turns into copies (and download into a wait). That
// keeps the model identical on every backend and lets a GPU step run without host round trips
// once the host logic has moved into ops (docs/design/2026-11-29-device-resident-forward.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "tensor/weight_view.h"

namespace di::backend {

class Memory {
 public:
  virtual ~Memory() = default;
  // `count` floats of backend memory, or nullptr when exhausted (a device backend then latches an
  // error that the caller sees after the forward; ops on a null view do nothing).
  virtual float* allocate(int64_t count) const = 0;
  virtual void deallocate(float* p) const = 0;
  virtual void upload(const float* host, float* dst, int64_t count) const = 0;
  // Waits for the ops that write `src` (a device backend synchronizes).
  virtual void download(const float* src, float* host, int64_t count) const = 0;
  // Starts a copy of `count` floats to `host` and returns its ticket: the copy is complete once
  // wait_download(ticket) returns, and the host goes on issuing work meanwhile (the next step while
  // this step's tokens come back). `host` must stay valid until then. Host memory copies at once.
  virtual uint64_t download_async(const float* src, float* host, int64_t count) const {
    download(src, host, count);
    return 0;
  }
  // Waits for the download `ticket` and every one started before it, not for later work.
  virtual void wait_download(uint64_t /*ticket*/) const {}
  // Strided copy inside backend memory: `rows` runs of `width` floats.
  virtual void copy_2d(const float* src,
                       int64_t src_stride,
                       float* dst,
                       int64_t dst_stride,
                       int64_t width,
                       int64_t rows) const = 0;
  void copy(const float* src, float* dst, int64_t count) const {
    copy_2d(src, count, dst, count, count, 1);
  }
  virtual void fill(float* dst, float value, int64_t count) const {
    const int64_t chunk = std::min<int64_t>(count, int64_t{1} << 20);
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(chunk, 0)), value);
    for (int64_t i = 0; i < count; i += chunk)
      upload(v.data(), dst + i, std::min(chunk, count - i));
  }
  // dst.row(i) = src.row(rows[i]) for the host row indices `rows`.
  virtual void gather_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const {
    for (int64_t i = 0; i < dst.rows; ++i) copy(src.row(rows[i]), dst.row(i), src.cols);
  }
  // dst[i][0, width) = src[i][0, width) for i < n: host tables of backend row pointers, so rows of
  // many sequences move in one call (a copy per row is a launch per row on a device). The rows
  // must not overlap.
  virtual void copy_rows(const float* const* src,
                         float* const* dst,
                         int64_t n,
                         int64_t width) const {
    for (int64_t i = 0; i < n; ++i) copy(src[i], dst[i], width);
  }
};

// Plain host memory (the CPU backend's, and tests').
class HostMemory : public Memory {
 public:
  // Cache-line aligned: the CPU kernels' 8-lane row loads otherwise depend on where the heap puts
  // each buffer (a layout shift once cost the mini model's decode step 20 %).
  float* allocate(int64_t count) const override {
    return new (std::align_val_t(64),
                std::nothrow) float[static_cast<size_t>(count > 0 ? count : 1)];
  }
  void deallocate(float* p) const override { operator delete[](p, std::align_val_t(64)); }
  void upload(const float* host, float* dst, int64_t count) const override {
    if (count > 0) std::memcpy(dst, host, sizeof(float) * static_cast<size_t>(count));
  }
  void download(const float* src, float* host, int64_t count) const override {
    if (count > 0) std::memcpy(host, src, sizeof(float) * static_cast<size_t>(count));
  }
  void copy_2d(const float* src,
               int64_t src_stride,
               float* dst,
               int64_t dst_stride,
               int64_t width,
               int64_t rows) const override {
    for (int64_t r = 0; r < rows; ++r) {
      std::memmove(dst + r * dst_stride, src + r * src_stride,
                   sizeof(float) * static_cast<size_t>(width));
    }
  }
};

// An owned [rows, cols] float array in backend memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Memory& memory, int64_t rows, int64_t cols)
      : memory_(&memory), data_(memory.allocate(rows * cols)), rows_(rows), cols_(cols) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      memory_ = std::exchange(o.memory_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      rows_ = std::exchange(o.rows_, 0);
      cols_ = std::exchange(o.cols_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  float* data() const { return data_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }
  RowsView view() const { return RowsView{data_, rows_, cols_}; }
  float* row(int64_t r) const { return data_ + r * cols_; }

  std::vector<float> to_host() const {
    std::vector<float> h(static_cast<size_t>(size()));
    if (data_) memory_->download(data_, h.data(), size());
    return h;
  }
  void from_host(const float* host) const {
    if (data_) memory_->upload(host, data_, size());
  }
  void from_host(const std::vector<float>& host) const { from_host(host.data()); }

 private:
  void reset() {
    if (memory_ && data_) memory_->deallocate(data_);
    data_ = nullptr;
  }
  const Memory* memory_ = nullptr;
  float* data_ = nullptr;
  int64_t rows_ = 0, cols_ = 0;
};

// A host copy of a buffer with the same shape: the model's explicit host round trip for the
// logic that has not moved into ops yet.
inline Buffer upload_rows(const Memory& m, const std::vector<float>& host, int64_t cols) {
  Buffer b(m, static_cast<int64_t>(host.size()) / (cols > 0 ? cols : 1), cols);
  b.from_host(host);
  return b;
}

}  // namespace di::backend
