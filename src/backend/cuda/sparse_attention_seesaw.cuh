// Internal to sparse_attention_seesaw.cu: the shared-memory layout, the descriptors and the
// synchronisation of the warp-specialised sparse attention kernel, and its producer warpgroups
// (sparse_attention_seesaw_producer.cuh). Device code is compiled for sm_90a only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_steps.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda::seesaw {

inline constexpr int kThreads = 512;  // consumers 0..255, producers 256..511
inline constexpr int kProducerWarps = 8;
// Registers per thread: the producers' (setmaxnreg) and the consumers' (256 minus it: the
// register file holds 512 x 128). 64 / 192 measured 1-2 % faster than 56 / 200 on the H200
// (session 17; the consumers then spill only in the epilogue's __fdiv_rn fallback).
inline constexpr int kProducerRegs = 64;
inline constexpr int kRowsPerWarp = 64 / kProducerWarps;
inline constexpr int kTile = 64 * kKvDim * 2;  // 64 rows x 512 bf16
inline constexpr int kPTile = 64 * 64 * 2;     // 64 heads x 64 keys bf16

// Benchmark timelines (args.ablate bit 6): [3 warpgroups][kTraceEvents] records, kept in shared
// memory while the kernel runs (a global store would make the traced thread's proxy fences wait
// for it) and copied out at the end.
inline constexpr int kTraceEvents = 256;

// Shared memory from a 1024-byte aligned base: Q, two key tiles, two P tiles, per-block stats
// [2][3][64] (max, denominator, rescale per head), the timeline records, the producer warps'
// valid-key masks [2][8] (8 keys per warp), the mbarriers.
struct SLayout {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kTile;
  static constexpr int kP = kK + 2 * kTile;
  static constexpr int kStats = kP + 2 * kPTile;
  static constexpr int kTrace = kStats + 2 * 3 * 64 * 4;
  static constexpr int kValid = kTrace + 3 * kTraceEvents * 8;
  static constexpr int kBars = kValid + 2 * 8;
  static constexpr int kEnd = kBars + 9 * 8;
  static constexpr size_t kBytes = kEnd;
};
static_assert(SLayout::kBytes <= 232448, "one block per SM");

#if DI_WGMMA_ENABLED

// Byte offset of 16-byte chunk c (0..63) of row r in a [64][512] bf16 tile stored as 8 sub-tiles
// [64][64] with the 128-byte swizzle (K-major for S, MN-major for PV).
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// A descriptor is a constant high word (128-byte swizzle, stride byte offset 1024) and a low word
// (the shared address / 16 in bits 0-13, the leading byte offset / 16 in bits 16-29). Shared
// addresses are below 2^18 (227 KB), so the low word of the descriptor at addr + off is the one at
// addr plus off / 16 (no carry leaves bits 0-13): the k steps' descriptors are one add each from
// a base computed once (session 19: the compiler rebuilt each from the address, about ten
// instructions per wgmma on the consumers' critical path).
inline constexpr uint32_t kDescHi = 0x40000040u;
__device__ __forceinline__ uint64_t desc(uint32_t lo) {
  return (uint64_t{kDescHi} << 32) | lo;
}
// The low word of the K-major descriptor (S step; P in the SS PV step): 8-row groups 1024 bytes
// apart, 128-byte swizzle.
__device__ __forceinline__ uint32_t desc_k_lo(uint32_t addr) {
  return ((addr & 0x3FFFF) >> 4) | (1u << 16);
}
// The low word of the MN-major descriptor (PV step, B = values [keys][dims], dims contiguous):
// 64-dim sub-tiles 8192 bytes apart (leading byte offset), 8-key groups 1024 bytes apart (stride
// byte offset).
__device__ __forceinline__ uint32_t desc_mn_lo(uint32_t addr) {
  return ((addr & 0x3FFFF) >> 4) | ((8192u >> 4) << 16);
}

// Benchmark only (args.ablate bit 6, the kernel's kTrace instantiation): thread 0 of each
// warpgroup of block kTraceBlock records (event, key block numbered across the block's queries,
// clock64), copied by flush() into args.workspace [3][kTraceEvents] (a timeline of its first
// queries). Trace<false>, in every real call, is empty: a disabled mark still issued about ten
// predicated instructions, some eighty a block on the owner's chain (session 21).
inline constexpr int kTraceBlock = 7;
template <bool kOn>
struct Trace {
  // Two registers while the kernel runs (the producers have 64): the records' shared address and
  // the count, which starts past the capacity (kTraceEvents + 1) outside the traced threads.
  uint32_t rec;
  int n;
  __device__ Trace(const SparseAttentionFp8Args& a, uint8_t* smem, int wg)
      : rec(smem_addr(smem + SLayout::kTrace) + wg * kTraceEvents * 8),
        n((a.ablate & 64) && blockIdx.x == kTraceBlock && threadIdx.x == 128 * wg
              ? 0
              : kTraceEvents + 1) {}
  __device__ void mark(int ev, int b) {
    if (n < kTraceEvents) {
      const uint64_t v = (static_cast<uint64_t>(ev) << 56) |
                         (static_cast<uint64_t>(b & 0xff) << 48) | (clock64() & 0xffffffffffffull);
      asm volatile("st.shared.u64 [%0], %1;\n" ::"r"(rec + 8 * n), "l"(v) : "memory");
      ++n;
    }
  }
  // Copies the records out (the traced thread, at its end).
  __device__ void flush(const SparseAttentionFp8Args& a, const uint8_t* smem, int wg) const {
    if (n > kTraceEvents) return;
    const uint64_t* src =
        reinterpret_cast<const uint64_t*>(smem + SLayout::kTrace) + wg * kTraceEvents;
    uint64_t* dst = static_cast<uint64_t*>(a.workspace) + wg * kTraceEvents;
    for (int i = 0; i < n; ++i) dst[i] = src[i];
  }
};
template <>
struct Trace<false> {
  __device__ Trace(const SparseAttentionFp8Args&, uint8_t*, int) {}
  __device__ void mark(int, int) {}
  __device__ void flush(const SparseAttentionFp8Args&, const uint8_t*, int) const {}
};

struct Bars {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + 16 + 8 * s; }
  __device__ uint32_t pfull(int s) const { return base + 32 + 8 * s; }
  __device__ uint32_t pempty(int s) const { return base + 48 + 8 * s; }
  __device__ uint32_t q() const { return base + 64; }
};

// Key j of query t: its stored row index (-1 when empty or past the end).
__device__ __forceinline__ int32_t key_index(const SparseAttentionFp8Args& a, int64_t t, int j) {
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  if (j >= num_keys) return -1;
  return j < num_win ? __ldg(a.indices + t * num_win + j)
                     : __ldg(a.extra_indices + t * a.num_extra + (j - num_win));
}

#endif  // DI_WGMMA_ENABLED

}  // namespace di::backend::cuda::seesaw
