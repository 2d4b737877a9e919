// The pieces of sample_rows.cu's per-row draw: a row reader with several float4 loads in flight,
// block reductions that break ties by index, the 8-bit radix cut over order keys (top-k by count,
// top-p by fixed-point weight) and the candidate buckets that let the cuts and the race run on a
// short list in shared memory instead of the whole row. Every comparison is on exact quantities
// (order keys, integer counts and weight sums, sample_math.h's IEEE-exact doubles), so the
// result does not depend on which thread saw which element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ref/sample_math.h"

namespace di::backend::cuda::sample_detail {

namespace ks = kernels::sample;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;              // radix bins per 8-bit level
constexpr int kBuckets = 4 * kThreads;  // candidate buckets below the row's max (4 per thread)
constexpr int kCap = 4096;              // candidates kept in shared memory
constexpr int kUnroll = 4;              // float4 loads in flight per thread
constexpr float kNegInf = -__builtin_huge_valf();
constexpr double kNegInfD = -__builtin_huge_val();

struct Shared {
  union {
    unsigned long long bucket[kBuckets];
    struct {
      float v[kCap];
      int32_t i[kCap];
    } cand;
  } u;
  unsigned long long hist[kBins];
  unsigned long long warp_u[kWarps];
  float red_v[kWarps];
  double red_d[kWarps];
  int64_t red_i[kWarps];
  int red_n[kWarps];
  uint32_t sel;
  int crossing;
  int count;
  unsigned long long above;
};

// The whole row from global memory (mask applied on reading: masked tokens read as -inf).
struct RowSrc {
  const float* row;
  const uint32_t* mask;
  int64_t cols;

  __device__ __forceinline__ float at(int64_t i) const {
    if (mask != nullptr && ((mask[i >> 5] >> (i & 31)) & 1u) == 0) return kNegInf;
    return row[i];
  }
  __device__ __forceinline__ void visit4(float4 q, int64_t i, auto& f) const {
    // i % 4 == 0, so the four bits share one mask word.
    const uint32_t bits = mask == nullptr ? 0xfu : (mask[i >> 5] >> (i & 31)) & 0xfu;
    f(i, (bits & 1u) ? q.x : kNegInf);
    f(i + 1, (bits & 2u) ? q.y : kNegInf);
    f(i + 2, (bits & 4u) ? q.z : kNegInf);
    f(i + 3, (bits & 8u) ? q.w : kNegInf);
  }
  // f(index, value) for this thread's elements; kUnroll float4 loads are issued before any is
  // used, so a pass is a few round trips instead of one per element.
  __device__ __forceinline__ void for_each(auto&& f) const {
    int64_t start = 0;
    if (cols % 4 == 0 && (reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
      const float4* r4 = reinterpret_cast<const float4*>(row);
      const int64_t n4 = cols / 4;
      int64_t j = threadIdx.x;
      for (; j + (kUnroll - 1) * kThreads < n4; j += kUnroll * kThreads) {
        float4 q[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) q[u] = r4[j + u * kThreads];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) visit4(q[u], 4 * (j + u * kThreads), f);
      }
      for (; j < n4; j += kThreads) visit4(r4[j], 4 * j, f);
      start = cols;
    }
    for (int64_t i = start + threadIdx.x; i < cols; i += kThreads) f(i, at(i));
  }
};

// The candidates in shared memory (any order).
struct CandSrc {
  const float* v;
  const int32_t* idx;
  int n;
  __device__ __forceinline__ void for_each(auto&& f) const {
    for (int j = threadIdx.x; j < n; j += kThreads) f(static_cast<int64_t>(idx[j]), v[j]);
  }
};

// (value, index) -> the largest value, the lowest index among equals; `none` marks no element.
template <class T>
__device__ __forceinline__ bool better(T v, int64_t i, T bv, int64_t bi, int64_t none) {
  return i != none && (bi == none || v > bv || (v == bv && i < bi));
}

// Block-wide argmax of (v, i) by `better`; every thread gets the result. T is float or double.
template <class T>
__device__ void block_argmax(T& v, int64_t& i, int64_t none, T* red, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const T ov = __shfl_down_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i, none)) {
      v = ov;
      i = oi;
    }
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    red[warp] = v;
    sh.red_i[warp] = i;
  }
  __syncthreads();
  v = red[0];
  i = sh.red_i[0];
  for (int w = 1; w < kWarps; ++w) {
    if (better(red[w], sh.red_i[w], v, i, none)) {
      v = red[w];
      i = sh.red_i[w];
    }
  }
  __syncthreads();
}

// Exclusive prefix sum over the block's threads (thread order); `total` gets the block's sum.
__device__ unsigned long long block_exclusive_scan(unsigned long long x,
                                                   unsigned long long& total,
                                                   Shared& sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned long long s = x;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long u = __shfl_up_sync(0xffffffffu, s, o);
    if (lane >= o) s += u;
  }
  if (lane == 31) sh.warp_u[warp] = s;
  __syncthreads();
  unsigned long long before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sh.warp_u[w];
    total += sh.warp_u[w];
  }
  __syncthreads();
  return before + s - x;
}

// The row's scale for the weights: w(v) = weight((v - mx) / T), exactly the reference's value;
// a token whose difference alone puts d below -23.5 weighs 0 without its division and exp.
struct Weigher {
  float mx;
  float temperature;
  double zero_below;  // (v - mx) under this: weight 0
  __device__ __forceinline__ unsigned long long operator()(float v) const {
    const double diff = static_cast<double>(v) - static_cast<double>(mx);
    if (diff < zero_below) return 0;
    return ks::weight(diff / static_cast<double>(temperature));
  }
};

// The key at which the mass (count, or weight when `weighted`) of the finite tokens with
// key >= lo, accumulated from the largest key down, first reaches `target` (target_is_share:
// target * the total of those tokens). Four 8-bit levels; each picks the bin where the running
// sum crosses, by a suffix scan of the 256 bins.
template <class Src>
__device__ uint32_t radix_cut(const Src& src,
                              uint32_t lo,
                              bool weighted,
                              const Weigher& wf,
                              double target,
                              bool target_is_share,
                              Shared& sh) {
  uint32_t prefix = 0;
  unsigned long long above = 0;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    const uint32_t hi_mask = level == 0 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = t; b < kBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    // A thread sums its run of equal bins in a register and adds it once: at the top levels
    // nearly every logit falls in one or two bins (same sign and exponent), and one shared
    // atomic per element there serializes the whole CTA.
    uint32_t run_bin = 0;
    unsigned long long run = 0;
    src.for_each([&](int64_t, float v) {
      if (v == kNegInf) return;
      const uint32_t k = ks::order_key(v);
      if (k < lo || (k & hi_mask) != prefix) return;
      const unsigned long long w = weighted ? wf(v) : 1ull;
      const uint32_t bin = (k >> shift) & 255u;
      if (bin != run_bin) {
        if (run != 0) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += w;
    });
    if (run != 0) atomicAdd(&sh.hist[run_bin], run);
    __syncthreads();
    // Suffix sums: thread t < 256 holds bin 255 - t; inclusive warp scans, then warp offsets.
    unsigned long long s = 0;
    if (t < kBins) {
      s = sh.hist[kBins - 1 - t];
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long u = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += u;
      }
      if (lane == 31) sh.warp_u[warp] = s;
    }
    __syncthreads();
    if (t < kBins) {
      for (int w = 0; w < warp; ++w) s += sh.warp_u[w];
      const int b = kBins - 1 - t;
      if (level == 0 && target_is_share && t == kBins - 1) sh.above = s;  // the total
      sh.hist[b] = s;  // in place: each thread read its own bin before
    }
    __syncthreads();
    if (level == 0 && target_is_share) {
      target = target * static_cast<double>(sh.above);
      target_is_share = false;
    }
    __syncthreads();
    if (t < kBins) {
      const int b = kBins - 1 - t;
      const unsigned long long incl = sh.hist[b];
      const unsigned long long excl = b == kBins - 1 ? 0ull : sh.hist[b + 1];
      if (static_cast<double>(above + incl) >= target &&
          !(static_cast<double>(above + excl) >= target)) {
        sh.sel = static_cast<uint32_t>(b);
        sh.above = above + excl;
      }
    }
    __syncthreads();
    prefix |= sh.sel << shift;
    above = sh.above;
    __syncthreads();
  }
  return prefix;
}

// Candidate buckets below the row's max, bucket 0 holding the max. Any bucketing that is monotone
// in the logit is exact here: it only chooses which tokens go to the short list, and the list
// holds every token at or above the bucket where the mass crosses. Top-k buckets by order key,
// 2^14 keys wide (about 2^-9 of the max's magnitude: the top tokens' spread scales with it);
// top-p alone by value, T / 64 wide, so that every token with a nonzero weight (d >= -23) lands
// in a counted bucket. The last bucket takes everything below and is not counted.
struct Bucketer {
  bool by_value;
  uint32_t kmx;  // order_key(max)
  float mx, per_unit;
  __device__ __forceinline__ uint32_t operator()(float v) const {
    constexpr uint32_t kLast = kBuckets - 1;
    if (!by_value) {
      const uint32_t b = (kmx - ks::order_key(v)) >> 14;
      return b < kLast ? b : kLast;
    }
    const float b = (mx - v) * per_unit;  // rounding is monotone, so the buckets are too
    return b < static_cast<float>(kLast) ? static_cast<uint32_t>(b) : kLast;
  }
};

// Fills the buckets (the last one, which takes everything below, is not counted: most of the
// row falls there) with counts, or with weights when `weighted` (then `total` = the weight of the
// whole row), and returns the first bucket at which the running sum from the top reaches
// target (times the total when weighted), or -1 if the counted buckets never reach it.
__device__ int bucket_crossing(const RowSrc& src,
                               const Bucketer& bucket,
                               bool weighted,
                               const Weigher& wf,
                               double target,
                               unsigned long long& total,
                               Shared& sh) {
  for (int b = threadIdx.x; b < kBuckets; b += kThreads) sh.u.bucket[b] = 0;
  if (threadIdx.x == 0) sh.crossing = -1;
  __syncthreads();
  unsigned long long mine = 0;
  src.for_each([&](int64_t, float v) {
    if (v == kNegInf) return;
    const uint32_t b = bucket(v);
    unsigned long long w = 1;
    if (weighted) {
      w = wf(v);
      mine += w;
      if (w == 0) return;
    }
    if (b < static_cast<uint32_t>(kBuckets - 1)) atomicAdd(&sh.u.bucket[b], w);
  });
  __syncthreads();
  const int first = 4 * static_cast<int>(threadIdx.x);
  unsigned long long h[4], sum4 = 0;
  for (int q = 0; q < 4; ++q) {
    h[q] = sh.u.bucket[first + q];
    sum4 += h[q];
  }
  if (weighted) {
    unsigned long long row_total = 0;
    (void)block_exclusive_scan(mine, row_total, sh);
    total = row_total;
    target = target * static_cast<double>(row_total);
  }
  unsigned long long all = 0;
  unsigned long long excl = block_exclusive_scan(sum4, all, sh);
  for (int q = 0; q < 4; ++q) {
    const unsigned long long incl = excl + h[q];
    if (first + q < kBuckets - 1 && static_cast<double>(incl) >= target &&
        !(static_cast<double>(excl) >= target)) {
      sh.crossing = first + q;
    }
    excl = incl;
  }
  __syncthreads();
  return sh.crossing;
}

// Copies every finite token in buckets <= crossing to the candidate list (which reuses the
// buckets' memory); returns the number of such tokens (> kCap: the list is incomplete).
__device__ int compact(const RowSrc& src, const Bucketer& bucket, int crossing, Shared& sh) {
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  src.for_each([&](int64_t i, float v) {
    if (v == kNegInf || bucket(v) > static_cast<uint32_t>(crossing)) return;
    const int slot = atomicAdd(&sh.count, 1);
    if (slot < kCap) {
      sh.u.cand.v[slot] = v;
      sh.u.cand.i[slot] = static_cast<int32_t>(i);
    }
  });
  __syncthreads();
  return sh.count;
}

}  // namespace di::backend::cuda::sample_detail
