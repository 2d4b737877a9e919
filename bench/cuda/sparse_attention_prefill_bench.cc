// `cuda_kernels_bench --sparse-attention`, the one-sequence prefill: 4,096 queries of one
// sequence at positions 8,192 .. 12,287 (a chunk of a long prompt), each with its 128-position
// window (consecutive ring rows, shared with its neighbours) and 512 of the sequence's
// compressed entries (ratio 4: 2,048-3,071 visible, an ascending random selection, as the
// indexer's top-k gives). Every key slot is filled. This is how the model's prefill calls the
// kernel; the main table's prefill case draws each query's compressed keys from a million rows
// instead, which no prefill does. Timed: the default seesaw kernel against the gather mode
// (sparse_attention_key_table.h: the table built in every timed call, then the kernel), next to
// the floor: FLOPs / cuBLASLt's bf16 rate and the distinct rows' bytes / copy bandwidth.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_key_table.h"
#include "cuda/bench_util.h"
#include "cuda/sparse_attention_bench.h"

namespace di::bench {
namespace {

using backend::cuda::kAttnHeads;
using backend::cuda::kKvDim;
using backend::cuda::kKvFp4RowBytes;
using backend::cuda::kKvFp8RowBytes;
using backend::cuda::SparseAttentionFp8Args;
using backend::cuda::SparseAttentionKeyTableShape;

constexpr int64_t kQueries = 4096, kFirstPosition = 8192;
constexpr int kWindow = 128, kSelected = 512, kRatio = 4, kSets = 4;

struct Call {
  SparseAttentionFp8Args args;
  SparseAttentionKeyTableShape shape;
  void* workspace = nullptr;
  size_t bytes = 0;
};

uint32_t next(uint64_t& s) {  // xorshift64
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return static_cast<uint32_t>(s >> 16);
}

// Milliseconds per call over `iters` calls cycling through the sets (gather: the table, then the
// kernel; table_only: the table alone), the median of 5 batches after 30 ms of warm-up.
Expected<double> time_calls(std::vector<Call>& calls, bool gather, bool table_only) {
  auto one = [&](Call& c) -> cudaError_t {
    SparseAttentionFp8Args a = c.args;
    if (gather) {
      const cudaError_t e =
          backend::cuda::sparse_attention_key_table(a, c.shape, c.workspace, c.bytes, nullptr);
      if (e != cudaSuccess || table_only) return e;
    }
    return backend::cuda::sparse_attention_fp8(a, nullptr);
  };
  const int iters = 5;
  std::vector<double> t;
  double warm = 0;
  for (int round = 0; round < 505 && t.size() < 5; ++round) {
    DI_ASSIGN_OR_RETURN(double ms, mean_event_ms(iters, [&](int i) {
                          return one(calls[static_cast<size_t>(i) % calls.size()]);
                        }));
    if (warm < 30.0) {
      warm += ms * iters;
    } else {
      t.push_back(ms);
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

Status sequence_prefill_case(const uint8_t* kv,
                             int64_t kv_rows,
                             const uint8_t* extra_kv,
                             int64_t extra_rows,
                             double bytes_per_s,
                             double bf16_flops,
                             bool profile) {
  DeviceBuffers buf;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  const int64_t T = kQueries, keys = kWindow + kSelected;
  std::vector<uint16_t> q(static_cast<size_t>(T * kAttnHeads * kKvDim));
  for (auto& x : q) x = static_cast<uint16_t>(0x3c00 + (next(rng) & 0x83ff));  // +-[2^-7, 2^-6)
  std::vector<float> sink(kAttnHeads);
  for (auto& s : sink) s = static_cast<float>(next(rng) % 100) / 50.0f - 1.0f;
  DI_ASSIGN_OR_RETURN(uint16_t * d_q, buf.upload(q));
  DI_ASSIGN_OR_RETURN(float* d_sink, buf.upload(sink));
  DI_ASSIGN_OR_RETURN(uint16_t * d_out, buf.upload(std::vector<uint16_t>(q.size(), 0)));
  const int64_t last_visible = (kFirstPosition + T) / kRatio;
  // The model's bound on the distinct rows (Model::attention): the chunk's window rows, then the
  // compressed entries its last query sees.
  const int64_t distinct = (T + kWindow - 1) + std::min(T * kSelected, last_visible);
  std::vector<Call> calls;
  for (int s = 0; s < kSets; ++s) {
    std::vector<int32_t> win(static_cast<size_t>(T * kWindow)),
        sel(static_cast<size_t>(T * kSelected));
    const int64_t wbase = next(rng) % (kv_rows - T - kWindow);
    const int64_t cbase = next(rng) % (extra_rows - last_visible);
    std::vector<char> taken(static_cast<size_t>(last_visible));
    for (int64_t t = 0; t < T; ++t) {
      for (int i = 0; i < kWindow; ++i)
        win[static_cast<size_t>(t * kWindow + i)] = static_cast<int32_t>(wbase + t + i);
      const int64_t visible = (kFirstPosition + t + 1) / kRatio;
      std::fill(taken.begin(), taken.end(), 0);
      for (int n = 0; n < kSelected;) {
        const auto e = static_cast<size_t>(next(rng) % visible);
        if (!taken[e]) {
          taken[e] = 1;
          ++n;
        }
      }
      int i = 0;
      for (int64_t e = 0; e < visible; ++e) {
        if (taken[static_cast<size_t>(e)])
          sel[static_cast<size_t>(t * kSelected + i++)] = static_cast<int32_t>(cbase + e);
      }
    }
    Call c;
    SparseAttentionFp8Args& a = c.args;
    a.q = d_q;
    a.num_queries = T;
    a.kv = kv;
    DI_ASSIGN_OR_RETURN(a.indices, buf.upload(win));
    a.num_indices = kWindow;
    a.extra_kv = extra_kv;
    DI_ASSIGN_OR_RETURN(a.extra_indices, buf.upload(sel));
    a.num_extra = kSelected;
    a.sink = d_sink;
    a.softmax_scale = 0.044194173824159216f;  // 512^-0.5
    a.out = d_out;
    c.shape = {kv_rows, extra_rows, distinct};
    c.bytes = backend::cuda::sparse_attention_key_table_bytes(a, c.shape);
    DI_ASSIGN_OR_RETURN(uint8_t * ws, buf.alloc<uint8_t>(c.bytes));
    c.workspace = ws;
    calls.push_back(c);
  }
  if (profile) {  // a few calls of each mode for a profiler, then both timelines
    for (bool gather : {false, true}) {
      Expected<double> unused = time_calls(calls, gather, false);
      if (!unused.has_value()) return unused.status();
    }
    Call& c = calls[0];
    SparseAttentionFp8Args a = c.args;
    DI_RETURN_IF_ERROR(print_seesaw_timeline(a));
    DI_CUDA_RETURN_IF_ERROR(
        backend::cuda::sparse_attention_key_table(a, c.shape, c.workspace, c.bytes, nullptr));
    return print_seesaw_timeline(a);
  }
  const double flops = 4.0 * kAttnHeads * kKvDim * static_cast<double>(T * keys);
  const double bytes = static_cast<double>(T + kWindow - 1) * kKvFp8RowBytes +
                       static_cast<double>(last_visible) * kKvFp4RowBytes +
                       2.0 * 2 * static_cast<double>(T) * kAttnHeads * kKvDim;
  const double floor_ms = std::max(flops / bf16_flops, bytes / bytes_per_s) * 1e3;
  double best[3] = {1e30, 1e30, 1e30};  // default, gather (table + kernel), the table alone
  for (int rep = 0; rep < 3; ++rep) {
    for (int v = 0; v < 3; ++v) {
      DI_ASSIGN_OR_RETURN(double ms, time_calls(calls, v > 0, v == 2));
      best[v] = std::min(best[v], ms);
    }
  }
  std::printf(
      "\none-sequence prefill (T=%lld at positions %lld.., window %d, %d of its compressed "
      "entries at ratio %d; %lld distinct rows at most):\n"
      "| mode | ms | floor ms | floor/time | TFLOP/s |\n|---|---|---|---|---|\n",
      static_cast<long long>(T), static_cast<long long>(kFirstPosition), kWindow, kSelected, kRatio,
      static_cast<long long>(distinct));
  const char* names[2] = {"seesaw, rows decoded per query", "gather: key table + seesaw"};
  for (int v = 0; v < 2; ++v) {
    std::printf("| %s | %.4f | %.4f | %.3f | %.0f |\n", names[v], best[v], floor_ms,
                floor_ms / best[v], flops / (best[v] * 1e-3) / 1e12);
  }
  std::printf("| (the key table alone) | %.4f | | | |\n", best[2]);
  return {};
}

}  // namespace di::bench
