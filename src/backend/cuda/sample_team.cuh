// The CTAs that draw one row together (sample_rows.cu): one CTA, or a thread-block cluster of
// kRanks CTAs that each read a slice of the row and meet in distributed shared memory. A batch
// of a few rows leaves most SMs idle with one CTA per row, and one CTA's pass over 129,280
// logits is bound by its own issue rate (docs/notes/cuda-kernels.md, "samp2"); a team of 16 runs
// each pass on 16 SMs. Everything the ranks combine is exact (the max with its lowest index,
// integer counts and weight sums, the race's argmax with index ties), so a row draws the same
// token for every team size, which keeps the draw independent of the batch.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda::sample_detail {

// A CTA's share of a team-wide reduction, read by the other ranks after a team barrier. Each
// phase has its own slot, so no slot is rewritten while another rank may still read it.
struct TeamPart {
  double d;
  int64_t i;
  unsigned long long u;
  float v;
  int n;
};

enum TeamSlot {
  kSlotMax = 0,
  kSlotTotal,
  kSlotRange,
  kSlotCross,
  kSlotCount,
  kSlotCut,
  kSlotRace,
  kSlots
};

template <int kRanks>
struct Team {
  static_assert(kRanks == 1 || kRanks == 2 || kRanks == 4 || kRanks == 8 || kRanks == 16);
  static constexpr int ranks = kRanks;
  int rank = 0;

  __device__ static Team here() {
    Team t;
    if constexpr (kRanks > 1)
      t.rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
    return t;
  }
  // Every thread of every rank. The cluster barrier is a release/acquire at cluster scope:
  // shared and global writes before it are visible to the whole team after it.
  __device__ __forceinline__ void sync() const {
    if constexpr (kRanks > 1) {
      cooperative_groups::this_cluster().sync();
    } else {
      __syncthreads();
    }
  }
  // Rank r's copy of this CTA's shared object p.
  template <class T>
  __device__ __forceinline__ T* of(T* p, int r) const {
    if constexpr (kRanks > 1) {
      return cooperative_groups::this_cluster().map_shared_rank(p, r);
    } else {
      return p;
    }
  }
  // Lane q < kRanks of the calling warp gets rank q's copy of the slot `part` (true); the other
  // lanes get nothing (false). Every warp may call it: the ranks' shares load in parallel.
  __device__ __forceinline__ bool load(const TeamPart* part, TeamPart& out) const {
    const int lane = static_cast<int>(threadIdx.x % 32);
    if (lane >= kRanks) return false;
    out = *of(const_cast<TeamPart*>(part), lane);
    return true;
  }
  // This rank's slice [begin, end) of a row of `cols` values: whole float4s, rank order.
  __device__ __forceinline__ void slice(int64_t cols, int64_t& begin, int64_t& end) const {
    const int64_t per = ((cols + 3) / 4 + kRanks - 1) / kRanks * 4;
    begin = per * rank < cols ? per * rank : cols;
    end = begin + per < cols ? begin + per : cols;
  }
};

// The sum over the warp's lanes, in every lane (exact: integers).
template <class T>
__device__ __forceinline__ T warp_sum(T x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

}  // namespace di::backend::cuda::sample_detail
