// The producer warpgroups of the warp-specialised sparse attention kernel
// (sparse_attention_seesaw.cu): every key block's stored rows loaded into registers and decoded
// into the bf16 key tiles. sm_90a device code only.
#pragma once

#include <type_traits>

#include "backend/cuda/sparse_attention_seesaw.cuh"

namespace di::backend::cuda::seesaw {

#if DI_WGMMA_ENABLED

// Rows a producer warp has in flight: the loads of row i + kLead of its row sequence are issued
// when row i is stored, into the registers row i has just freed (kLead divides the 8 rows a warp
// has in each key block, so a row's registers are a compile-time slot). Measured on the H200 at
// the 4K prefill (session 18): 1.112 ms with 2, 1.117 with 1, 1.142 with 4, 1.37 with 8 (which
// spills: a reload from local memory waits behind the row loads in flight). The producers must
// stay within their 64 registers without spills for the same reason.
inline constexpr int kLead = 2;
static_assert(kRowsPerWarp % kLead == 0, "register slots");

// One lane's share of a stored row: 16 dims as codes (FP8: 16 bytes; FP4: 8 bytes in x, y) and
// their scale byte (FP8: ue8m0 of 32 dims; FP4: e4m3 of 16 dims). An empty slot keeps zero codes
// and a zero scale, which both decoders turn into +0 (as the tile's empty rows must be).
struct RowShare {
  uint4 codes;
  uint32_t scale;
};

// One lane's loads of a stored row, both predicated on row >= 0 (one `setp` for the pair): its
// codes (FP8: 16 bytes; FP4: 8 bytes into x, y) and its scale byte. Non-coherent (the pools are
// not written during the call) and skipping L1 (no reuse within an SM: its queries are gridDim.x
// apart). volatile with a memory clobber: the compiler keeps them where they are written, kLead
// rows ahead of their use (a plain load was moved next to its use, one memory latency per row:
// docs/notes/cuda-kernels.md, session 16). With fp8 a compile-time constant (the blocks by
// format), ptxas drops the other width's load, whose predicate folds to false.
__device__ __forceinline__ void ld_row_share(
    RowShare& s, const uint8_t* codes, const uint8_t* scale, int32_t row, bool fp8) {
  asm volatile(
      "{\n .reg .pred p, q, p8, p4;\n"
      " setp.ge.s32 p, %5, 0;\n setp.ne.b32 q, %6, 0;\n"
      " and.pred p8, p, q;\n and.pred p4, p, !q;\n"
      " @p8 ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%7];\n"
      " @p4 ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%7];\n"
      " @p ld.global.nc.L1::no_allocate.u8 %4, [%8];\n}\n"
      : "+r"(s.codes.x), "+r"(s.codes.y), "+r"(s.codes.z), "+r"(s.codes.w), "+r"(s.scale)
      : "r"(row), "r"(static_cast<int>(fp8)), "l"(codes), "l"(scale)
      : "memory");
}

// A 64-bit value the compiler cannot split: a lane's base address stays one register pair, so
// that a row's address is one IMAD.WIDE (left to itself, the compiler kept the pool's base in a
// uniform register and added it per row: two more 64-bit adds per row; session 21).
__device__ __forceinline__ const uint8_t* opaque(const uint8_t* p) {
  asm("mov.b64 %0, %0;" : "+l"(p));
  return p;
}

// This lane's addresses in FP4 row 0 (its 8 code bytes and its scale byte), so that a row's two
// addresses are one multiply-add each.
struct Fp4LaneBases {
  const uint8_t* codes;
  const uint8_t* scale;
};

// Issues this lane's loads of stored row `row` (< 0: none) in the FP8 (fp8) or FP4 format. The
// addresses of a row < 0 are computed but never read.
__device__ __forceinline__ RowShare load_share(const SparseAttentionFp8Args& a,
                                               const Fp4LaneBases& fp4,
                                               bool fp8,
                                               int32_t row,
                                               int lane,
                                               bool enabled) {
  RowShare s{make_uint4(0, 0, 0, 0), 0};
  const int32_t r = enabled ? row : -1;
  const uint8_t* codes;
  const uint8_t* scale;
  if (fp8) {
    const uint8_t* base = attn::fp8_row(a, r);
    codes = base + 16 * lane;
    scale = base + 512 + lane / 2;
  } else {
    codes = fp4.codes + static_cast<int64_t>(r) * kKvFp4RowBytes;
    scale = fp4.scale + static_cast<int64_t>(r) * kKvFp4RowBytes;
  }
  ld_row_share(s, codes, scale, r, fp8);
  return s;
}

// The producer warpgroups (threads 256..511), over the block's queries t = blockIdx.x,
// + gridDim.x, ...: every key block into tile gb % 2 (gb numbers the key blocks across the
// queries, as the consumers do). Warp pw owns rows 8 pw .. 8 pw + 7 of each block: a sequence of
// rows across the blocks and queries, loaded kLead rows ahead into registers. Lane l decodes dims
// 16 l .. 16 l + 15 into the tile. Two warpgroups keep two warps per scheduler on the per-row
// dependency chains (one left the consumers waiting: docs/notes/cuda-kernels.md, session 16).
// kAblate: the benchmark's variant, where args.ablate bits 0 and 1 leave out the loads and the
// decode (a select per decoded word in every row otherwise); kTrace: the timeline's (Trace).
template <bool kAblate, bool kTrace>
__device__ __forceinline__ void produce(const SparseAttentionFp8Args& a,
                                        uint8_t* smem,
                                        const Bars& bars,
                                        int num_blocks) {
  const int ptid = threadIdx.x - 256, pw = ptid >> 5, lane = threadIdx.x & 31;
  const int num_win = a.num_indices;
  const bool do_load = !kAblate || !(a.ablate & 1), do_decode = !kAblate || !(a.ablate & 2);
  if (num_blocks <= 0) return;
  Trace<kTrace> tr(a, smem, 2);
  // Whether row i of this warp in block b is an FP8 (window) row.
  auto fp8_key = [&](int b, int i) { return b * 64 + kRowsPerWarp * pw + i < num_win; };
  // Lane i < 8 holds the index of the warp's row i in block b of query t (-1 past the end).
  auto block_indices = [&](int t, int b) {
    return lane < kRowsPerWarp && t < a.num_queries
               ? key_index(a, t, b * 64 + kRowsPerWarp * pw + lane)
               : -1;
  };
  // Odd sub-tile lanes store their odd chunk first, so that each warp store covers all eight
  // 16-byte bank groups (4 wavefronts, not 8): they decode their codes' halves swapped.
  const bool odd = (lane >> 2) & 1;
  // sw128(8 pw + i, c) for the lane's first chunk c = 2 lane + odd: this XOR (i << 4), plus
  // i * 128; its second chunk (c ^ 1) flips bit 4.
  const uint32_t off_first = sw128(kRowsPerWarp * pw, 2 * lane + odd);

  // This block (t, b); the block k later is (t + q G, (b + k) - q num_blocks), q = (b + k) /
  // num_blocks (k <= 2, so at most two wraps; recomputed rather than kept: registers).
  // (Query numbers fit an int: the Q tensor map's 2^32 rows bound them to 2^26.)
  int t = blockIdx.x, b = 0;
  auto later_indices = [&](int k) {
    int bk = b + k, tk = t;
    while (bk >= num_blocks) {
      bk -= num_blocks;
      tk += gridDim.x;
    }
    return block_indices(tk, bk);
  };
  auto later_block = [&](int k) {
    int bk = b + k;
    while (bk >= num_blocks) bk -= num_blocks;
    return bk;
  };
  const Fp4LaneBases fp4{opaque(a.extra_kv + 8 * lane), opaque(a.extra_kv + 256 + lane)};
  int32_t cur = block_indices(t, b), nxt = later_indices(1);
  RowShare share[kLead];
#pragma unroll
  for (int i = 0; i < kLead; ++i) {
    share[i] = load_share(a, fp4, fp8_key(0, i), __shfl_sync(0xffffffffu, cur, i), lane, do_load);
  }

  auto block = [&](auto f, int gb) {
    constexpr int F = decltype(f)::value;
    const int tile = gb & 1;
    if (b == 0) tr.mark(1, gb);
    if (gb >= 2) mbar::wait(bars.empty(tile), ((gb >> 1) - 1) & 1);
    tr.mark(3, gb);
    uint8_t* ks = smem + SLayout::kK + tile * kTile;
    int32_t nn = -1;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      RowShare& s = share[i % kLead];
      const bool fp8 = F == 1 || (F == 0 && fp8_key(b, i));
      uint32_t v[8];
      if (fp8) {
        const uint4 c = odd ? make_uint4(s.codes.z, s.codes.w, s.codes.x, s.codes.y) : s.codes;
        decode_fp8x16(c, s.scale, v);
      } else {
        const uint2 c = odd ? make_uint2(s.codes.y, s.codes.x) : make_uint2(s.codes.x, s.codes.y);
        decode_fp4x16(c, s.scale, v);
      }
      if (!do_decode) {
#pragma unroll
        for (int w = 0; w < 8; ++w) v[w] = 0;
      }
      *reinterpret_cast<uint4*>(ks + (off_first ^ (i << 4)) + i * 128) =
          make_uint4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<uint4*>(ks + (off_first ^ (i << 4) ^ 16) + i * 128) =
          make_uint4(v[4], v[5], v[6], v[7]);
      // The indices of the block two later, mid-block: their load and address arithmetic
      // overlap the rows instead of adding to the time between blocks.
      if (i == kRowsPerWarp / 2 - 1) nn = later_indices(2);
      // The row kLead later in the warp's sequence into the freed slot (the next block's for
      // the last kLead rows).
      const int i2 = i + kLead;
      if (i2 < kRowsPerWarp) {
        const bool fp8_2 = F == 1 || (F == 0 && fp8_key(b, i2));
        s = load_share(a, fp4, fp8_2, __shfl_sync(0xffffffffu, cur, i2), lane, do_load);
      } else {
        s = load_share(a, fp4, fp8_key(later_block(1), i2 - kRowsPerWarp),
                       __shfl_sync(0xffffffffu, nxt, i2 - kRowsPerWarp), lane, do_load);
      }
    }
    const uint32_t valid = __ballot_sync(0xffffffffu, cur >= 0) & 0xffu;
    if (lane == 0) smem[SLayout::kValid + tile * 8 + pw] = static_cast<uint8_t>(valid);
    // No proxy fence here: it compiles to MEMBAR.ALL.CTA, which would wait for the next block's
    // loads in flight (one memory latency a block, measured); the owner consumer fences after
    // its wait on `full`, on the causality path from these stores to every wgmma that reads them.
    mbar::arrive(bars.full(tile));
    tr.mark(4, gb);
    cur = nxt;
    nxt = nn;
  };
  // The blocks of each query by format (all FP8 rows, the one where the window ends, all FP4
  // rows), so that no block tests its format (a three-way switch a block cost about 300 cycles of
  // uniform-datapath arithmetic and branches between blocks: session 19).
  const int fp8_blocks = min(num_win / 64, num_blocks);
  const int mixed_end = num_win % 64 != 0 ? min(fp8_blocks + 1, num_blocks) : fp8_blocks;
  for (int gb = 0; t < a.num_queries; t += gridDim.x) {
    for (b = 0; b < fp8_blocks; ++b, ++gb) block(std::integral_constant<int, 1>{}, gb);
    for (; b < mixed_end; ++b, ++gb) block(std::integral_constant<int, 0>{}, gb);
    for (; b < num_blocks; ++b, ++gb) block(std::integral_constant<int, 2>{}, gb);
  }
  tr.flush(a, smem, 2);
}

#endif  // DI_WGMMA_ENABLED

}  // namespace di::backend::cuda::seesaw
