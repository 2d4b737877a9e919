#include "backend/tracing_ops.h"

#include <cinttypes>
#include <cstring>

#include "backend/checksum.h"

namespace di::backend {

namespace {

// The backend's pending checksums are collected (one wait) once this many accumulate.
constexpr int64_t kFlushEvery = 4096;

}  // namespace

Expected<std::unique_ptr<TracingOps>> TracingOps::create(std::unique_ptr<Ops> inner,
                                                         const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    return invalid_argument("--trace-ops: cannot open '" + path +
                            "' for writing: " + std::strerror(errno));
  }
  return std::unique_ptr<TracingOps>(new TracingOps(std::move(inner), f));
}

TracingOps::~TracingOps() {
  (void)flush();
  std::fclose(file_);
}

Status TracingOps::status() const {
  Status s = inner_->status();
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status TracingOps::flush() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flush_locked();
}

Status TracingOps::flush_locked() const {
  if (!error_.ok()) return error_;
  std::vector<uint64_t> values;
  if (pending_ > 0) values = inner_->take_checksums();
  if (static_cast<int64_t>(values.size()) != pending_) {
    // The backend failed (its status says why) or lost records: the trace stops here.
    error_ = Status(StatusCode::kInternal, "--trace-ops: the backend returned " +
                                               std::to_string(values.size()) + " of " +
                                               std::to_string(pending_) + " checksums");
    return error_;
  }
  size_t next = 0;
  for (Record& r : records_) {
    if (r.pending) r.value = values[next++];
    if (std::fprintf(file_, "%" PRId64 " %s %s %zu %016" PRIx64 "\n", written_++, r.op.c_str(),
                     r.what.c_str(), r.bytes, r.value) < 0) {
      error_ = Status(StatusCode::kInternal, "--trace-ops: write failed");
      return error_;
    }
  }
  records_.clear();
  pending_ = 0;
  if (std::fflush(file_) != 0) error_ = Status(StatusCode::kInternal, "--trace-ops: write failed");
  return error_;
}

void TracingOps::backend_bytes(const char* op,
                               std::string what,
                               const void* data,
                               size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return;
  Record r{op, std::move(what), bytes, false, 0};
  if (data == nullptr || bytes == 0) {
    r.value = checksum_length_term(0);
  } else if (inner_->record_checksum(data, bytes)) {
    r.pending = true;
    ++pending_;
  } else {
    r.value = checksum_bytes(data, bytes);
  }
  records_.push_back(std::move(r));
  if (pending_ >= kFlushEvery) (void)flush_locked();
}

void TracingOps::host_bytes(const char* op,
                            std::string what,
                            const void* data,
                            size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return;
  records_.push_back(Record{op, std::move(what), bytes, false,
                            data && bytes ? checksum_bytes(data, bytes) : checksum_length_term(0)});
}

void TracingOps::rows(const char* op, const char* what, ConstRowsView v) const {
  backend_bytes(op, what, v.data, float_bytes(v.rows * v.cols));
}

// --- memory ---

void TracingOps::upload(const float* host, float* dst, int64_t count) const {
  inner_->upload(host, dst, count);
  backend_bytes("upload", "dst", dst, float_bytes(count));
}

uint64_t TracingOps::download_async(const float* src, float* host, int64_t count) const {
  const uint64_t ticket = inner_->download_async(src, host, count);
  backend_bytes("download_async", "src", src, float_bytes(count));  // the host's copy comes later
  return ticket;
}

void TracingOps::download(const float* src, float* host, int64_t count) const {
  inner_->download(src, host, count);
  host_bytes("download", "host", host, float_bytes(count));
}

void TracingOps::copy_2d(const float* src,
                         int64_t src_stride,
                         float* dst,
                         int64_t dst_stride,
                         int64_t width,
                         int64_t rows) const {
  inner_->copy_2d(src, src_stride, dst, dst_stride, width, rows);
  for (int64_t r = 0; r < rows; ++r) {
    backend_bytes("copy_2d", "dst" + std::to_string(r), dst + r * dst_stride, float_bytes(width));
  }
}

void TracingOps::fill(float* dst, float value, int64_t count) const {
  inner_->fill(dst, value, count);
  backend_bytes("fill", "dst", dst, float_bytes(count));
}

void TracingOps::gather_rows(ConstRowsView src, const int64_t* idx, RowsView dst) const {
  inner_->gather_rows(src, idx, dst);
  rows("gather_rows", "dst", dst);
}

void TracingOps::copy_rows(const float* const* src,
                           float* const* dst,
                           int64_t n,
                           int64_t width) const {
  inner_->copy_rows(src, dst, n, width);
  for (int64_t i = 0; i < n; ++i) {
    backend_bytes("copy_rows", "dst" + std::to_string(i), dst[i], float_bytes(width));
  }
}

// --- products, norms, quantizers ---

void TracingOps::linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const {
  inner_->linear(x, w, y, round_bf16);
  rows("linear", "y", y);
}

void TracingOps::linear_pair(ConstRowsView x,
                             const WeightView& w0,
                             RowsView y0,
                             const WeightView& w1,
                             RowsView y1,
                             bool round_bf16) const {
  inner_->linear_pair(x, w0, y0, w1, y1, round_bf16);
  rows("linear_pair", "y0", y0);
  rows("linear_pair", "y1", y1);
}

void TracingOps::grouped_linear(
    ConstRowsView x, const WeightView& w, int groups, RowsView y, bool round_bf16) const {
  inner_->grouped_linear(x, w, groups, y, round_bf16);
  rows("grouped_linear", "y", y);
}

void TracingOps::rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const {
  inner_->rms_norm(x, w, eps, y);
  rows("rms_norm", "y", y);
}

void TracingOps::fake_quant_fp8(RowsView x, int block) const {
  inner_->fake_quant_fp8(x, block);
  rows("fake_quant_fp8", "x", x);
}

void TracingOps::fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const {
  inner_->fake_quant_fp4(x, kind);
  rows("fake_quant_fp4", "x", x);
}

void TracingOps::rope(RowsView x,
                      int num_heads,
                      int head_dim,
                      int rope_offset,
                      const int64_t* positions,
                      const RopeTable& table,
                      bool inverse) const {
  inner_->rope(x, num_heads, head_dim, rope_offset, positions, table, inverse);
  rows("rope", "x", x);
}

void TracingOps::add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const {
  inner_->add_round_bf16(a, b, out);
  rows("add_round_bf16", "out", out);
}

void TracingOps::scale_round_bf16(RowsView x, float scale) const {
  inner_->scale_round_bf16(x, scale);
  rows("scale_round_bf16", "x", x);
}

}  // namespace di::backend
