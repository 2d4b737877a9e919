// The pieces of sample_rows.cu's per-row draw: a row reader with several float4 loads in flight,
// block reductions that break ties by index, the 8-bit radix cut over order keys (top-k by count,
// top-p by fixed-point weight) and the candidate buckets that let the cuts and the race run on a
// short list in shared memory instead of the whole row. Every comparison is on exact quantities
// (order keys, integer counts and weight sums, sample_math.h's IEEE-exact doubles), so the
// result does not depend on which thread, or which rank of a team (sample_team.cuh), saw which
// element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/sample_team.cuh"
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
  unsigned long long raw[kBins];  // a radix level's counts (the team's ranks read them)
  TeamPart part[kSlots];          // this CTA's shares of team-wide reductions
  unsigned long long warp_u[kWarps];
  float red_v[kWarps];
  double red_d[kWarps];
  int64_t red_i[kWarps];
  int red_n[kWarps];
  int count;
};

// The row's slice [begin, end) from global memory (mask applied on reading: masked tokens read
// as -inf); the whole row for a team of one.
struct RowSrc {
  const float* row;
  const uint32_t* mask;
  int64_t begin, end;

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
    int64_t start = begin;
    if (begin % 4 == 0 && (reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
      const float4* r4 = reinterpret_cast<const float4*>(row + begin);
      const int64_t n4 = (end - begin) / 4;
      int64_t j = threadIdx.x;
      for (; j + (kUnroll - 1) * kThreads < n4; j += kUnroll * kThreads) {
        float4 q[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) q[u] = r4[j + u * kThreads];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) visit4(q[u], begin + 4 * (j + u * kThreads), f);
      }
      for (; j < n4; j += kThreads) visit4(r4[j], begin + 4 * j, f);
      start = begin + 4 * n4;
    }
    for (int64_t i = start + threadIdx.x; i < end; i += kThreads) f(i, at(i));
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

// The argmax of (v, i) by `better` over the warp's lanes, in every lane (`better` is a total
// order, so the butterfly gives every lane the same pair).
template <class T>
__device__ __forceinline__ void warp_argmax(T& v, int64_t& i, int64_t none) {
  for (int o = 16; o > 0; o >>= 1) {
    const T ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i, none)) {
      v = ov;
      i = oi;
    }
  }
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

// Where a running sum crosses `target`, over counts that every rank of the team holds for its
// own slice (counts[n] in each rank's shared memory; n a power of two, kRanks <= n <= 4 kThreads).
// The sum runs over the team's totals in order from index 0 up
// (from n - 1 down when `descending`), starting at `base`; the crossing is the first index i
// (never `excluded`) where base + the mass up to and including i reaches target (times the total
// when `share`: the counted total, or with `row_total` the sum of the ranks' kSlotTotal).
// Each rank sums only its 1 / kRanks of the indices over the team (distributed shared memory
// reads, each rank starting at its own neighbour, so that no rank's memory serves everyone at
// once), then the ranks exchange their range totals and the one whose range holds the crossing
// publishes it. Every rank returns the same result; index -1 when the sum never reaches target.
// The caller's counts must be complete (the team barrier is inside), and may be rewritten once
// this returns.
struct Crossing {
  int index;
  unsigned long long above;  // base + the mass before the crossing
  unsigned long long total;  // the total the share was taken of (with `share`)
};

template <int n, int kRanks>
__device__ Crossing team_crossing(const unsigned long long* counts,
                                  bool descending,
                                  int excluded,
                                  unsigned long long base,
                                  double target,
                                  bool share,
                                  bool row_total,
                                  const Team<kRanks>& team,
                                  Shared& sh) {
  static_assert(n % kRanks == 0 && n <= 4 * kThreads);
  constexpr int own = n / kRanks;  // positions per rank
  constexpr int per = own > kThreads ? own / kThreads : 1;
  const int first = static_cast<int>(threadIdx.x) * per;  // this thread's first own position
  unsigned long long v[per] = {}, mine = 0;
  team.sync();
  if (first < own) {
    for (int q = 0; q < kRanks; ++q) {
      const unsigned long long* from = team.of(counts, (team.rank + q) % kRanks);
#pragma unroll
      for (int j = 0; j < per; ++j) {
        const int g = team.rank * own + first + j;
        v[j] += from[descending ? n - 1 - g : g];
      }
    }
#pragma unroll
    for (int j = 0; j < per; ++j) mine += v[j];
  }
  unsigned long long range = 0;
  unsigned long long excl = block_exclusive_scan(mine, range, sh);
  if (threadIdx.x == 0) {
    sh.part[kSlotRange].u = range;
    sh.part[kSlotCross].n = -1;
  }
  team.sync();
  TeamPart q{};
  const bool mine_q = team.load(&sh.part[kSlotRange], q);
  const unsigned long long r = mine_q ? q.u : 0;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned long long before = base + warp_sum(lane < team.rank ? r : 0ull);
  const unsigned long long counted = warp_sum(r);
  unsigned long long rows = 0;
  if (row_total) rows = warp_sum(team.load(&sh.part[kSlotTotal], q) ? q.u : 0ull);
  const unsigned long long total = row_total ? rows : counted;
  if (share) target = target * static_cast<double>(total);
  if (first < own) {
    excl += before;
#pragma unroll
    for (int j = 0; j < per; ++j) {
      const int g = team.rank * own + first + j;
      const int i = descending ? n - 1 - g : g;
      const unsigned long long incl = excl + v[j];
      if (i != excluded && static_cast<double>(incl) >= target &&
          !(static_cast<double>(excl) >= target)) {
        sh.part[kSlotCross].n = i;
        sh.part[kSlotCross].u = excl;
      }
      excl = incl;
    }
  }
  team.sync();
  Crossing c{-1, 0, total};
  const bool has = team.load(&sh.part[kSlotCross], q) && q.n >= 0;
  const unsigned holders = __ballot_sync(0xffffffffu, has);
  if (holders != 0) {
    const int from = __ffs(holders) - 1;
    c.index = __shfl_sync(0xffffffffu, q.n, from);
    c.above = __shfl_sync(0xffffffffu, q.u, from);
  }
  return c;
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
// key >= lo, accumulated from the largest key down after `base` (the mass of tokens above every
// one in src), first reaches `target` (target_is_share: target * the total of those tokens). Four
// 8-bit levels; each picks the bin where the running sum over the team's ranks crosses (every rank
// picks the same bin).
template <class Src, int kRanks>
__device__ uint32_t radix_cut(const Src& src,
                              uint32_t lo,
                              bool weighted,
                              const Weigher& wf,
                              double target,
                              bool target_is_share,
                              const Team<kRanks>& team,
                              Shared& sh,
                              unsigned long long base = 0) {
  uint32_t prefix = 0;
  unsigned long long above = base;
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    const uint32_t hi_mask = level == 0 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < kBins; b += kThreads) sh.raw[b] = 0;
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
        if (run != 0) atomicAdd(&sh.raw[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += w;
    });
    if (run != 0) atomicAdd(&sh.raw[run_bin], run);
    const Crossing c = team_crossing<kBins>(sh.raw, true, -1, above, target,
                                            level == 0 && target_is_share, false, team, sh);
    if (level == 0 && target_is_share) target = target * static_cast<double>(c.total);
    prefix |= static_cast<uint32_t>(c.index < 0 ? 0 : c.index) << shift;
    above = c.above;
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
// whole row), and returns the first bucket at which the running sum from the top, over the
// team's ranks, reaches target (times the total when weighted), or -1 if the counted buckets
// never reach it (and the mass before that bucket). Every rank returns the same.
template <int kRanks>
__device__ Crossing bucket_crossing(const RowSrc& src,
                                    const Bucketer& bucket,
                                    bool weighted,
                                    const Weigher& wf,
                                    double target,
                                    unsigned long long& total,
                                    const Team<kRanks>& team,
                                    Shared& sh) {
  for (int b = threadIdx.x; b < kBuckets; b += kThreads) sh.u.bucket[b] = 0;
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
  if (weighted) {
    unsigned long long cta_total = 0;
    (void)block_exclusive_scan(mine, cta_total, sh);
    if (threadIdx.x == 0) sh.part[kSlotTotal].u = cta_total;
  }
  const Crossing c = team_crossing<kBuckets>(sh.u.bucket, false, kBuckets - 1, 0, target, weighted,
                                             weighted, team, sh);
  if (weighted) total = c.total;
  return c;
}

// Copies every finite token in buckets [from, crossing] to the candidate list (which reuses the
// buckets' memory); returns the number of such tokens over the team (> kCap: the list is
// incomplete). A team gathers its list in rank 0's memory, in rank order.
template <int kRanks>
__device__ int compact(const RowSrc& src,
                       const Bucketer& bucket,
                       int from,
                       int crossing,
                       const Team<kRanks>& team,
                       Shared& sh) {
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  src.for_each([&](int64_t i, float v) {
    if (v == kNegInf) return;
    const uint32_t b = bucket(v);
    if (b > static_cast<uint32_t>(crossing) || b < static_cast<uint32_t>(from)) return;
    const int slot = atomicAdd(&sh.count, 1);
    if (slot < kCap) {
      sh.u.cand.v[slot] = v;
      sh.u.cand.i[slot] = static_cast<int32_t>(i);
    }
  });
  __syncthreads();
  if constexpr (kRanks == 1) {
    // Read before the barrier: the next compaction's reset must not overtake a slow reader.
    const int n = sh.count;
    __syncthreads();
    return n;
  } else {
    if (threadIdx.x == 0) sh.part[kSlotCount].n = sh.count;
    team.sync();
    TeamPart q{};
    const int n = team.load(&sh.part[kSlotCount], q) ? q.n : 0;
    const int total = warp_sum(n);
    const int offset = warp_sum(static_cast<int>(threadIdx.x % 32) < team.rank ? n : 0);
    if (total <= kCap && team.rank > 0) {
      float* v = team.of(sh.u.cand.v, 0);
      int32_t* idx = team.of(sh.u.cand.i, 0);
      for (int j = threadIdx.x; j < sh.count; j += kThreads) {
        v[offset + j] = sh.u.cand.v[j];
        idx[offset + j] = sh.u.cand.i[j];
      }
    }
    team.sync();
    return total;
  }
}

}  // namespace di::backend::cuda::sample_detail
