// The producer warpgroups of the warp-specialised sparse attention kernel
// (sparse_attention_seesaw.cu): every key block's stored rows gathered with cp.async and decoded
// into the bf16 key tiles. sm_90a device code only.
#pragma once

#include <type_traits>

#include "backend/cuda/sparse_attention_seesaw.cuh"

namespace di::backend::cuda::seesaw {

#if DI_WGMMA_ENABLED

// The producer warpgroups (threads 256..511), over the block's queries t = blockIdx.x,
// + gridDim.x, ...: every key block into tile gb % 2 (gb numbers the key blocks across the
// queries, as the consumers do). Warp pw owns rows 8 pw .. 8 pw + 7 of each block (its row
// sequence). A row's stored bytes are copied with cp.async into the warp's ring a few rows before
// it is decoded (below), then lane l decodes dims 16 l .. 16 l + 15 into the tile (FP8: 16 codes
// and the ue8m0 scale; FP4: 8 bytes of codes and the e4m3 scale). Asynchronous copies keep rows
// in flight whatever the compiler schedules (loads into registers were issued just before their
// use: one memory latency per row, measured), and two warpgroups of producers keep two warps per
// scheduler on the per-row dependency chains (one warpgroup left the consumers waiting:
// docs/notes/cuda-kernels.md, session 16).
__device__ __forceinline__ void produce(const SparseAttentionFp8Args& a,
                                        uint8_t* smem,
                                        const Bars& bars,
                                        int num_blocks) {
  const int ptid = threadIdx.x - 256, pw = ptid >> 5, lane = threadIdx.x & 31;
  const int num_win = a.num_indices;
  const bool do_load = !(a.ablate & 1), do_decode = !(a.ablate & 2);
  Trace tr(a, 2);
  uint8_t* ring = smem + SLayout::kRaw + pw * kRingBytes;
  // A block's storage format: 1 all FP8 rows, 2 all FP4 rows, 0 mixed (the window ends in it).
  auto format = [&](int b) { return b * 64 + 64 <= num_win ? 1 : b * 64 >= num_win ? 2 : 0; };
  int slot = 0;  // the current row's slot in the ring
  int qi = 0;
  for (int64_t t = blockIdx.x; t < a.num_queries && num_blocks > 0; t += gridDim.x, ++qi) {
    const int gb0 = qi * num_blocks;
    tr.mark(1, gb0);
    // Lane i < 8 holds the index of the warp's row i in block b (cur), b + 1 (nxt), b + 2 (nn).
    // (Loading the next query's first indices during this one's last blocks measured 1.5 %
    // slower on the H200: session 17.)
    auto block_indices = [&](int b) {
      return lane < kRowsPerWarp && b < num_blocks
                 ? key_index(a, t, b * 64 + kRowsPerWarp * pw + lane)
                 : -1;
    };
    int32_t cur = block_indices(0), nxt = block_indices(1);
    // Copies row i of the warp's rows in block b (index row) into ring slot `slot` (slots of
    // `stride` bytes); the caller commits the row's group.
    auto copy_row = [&](int b, int i, int32_t row, int slot, int stride) {
      if (row >= 0 && b < num_blocks && do_load) {
        uint8_t* dst = ring + slot * stride + lane * 16;
        if (b * 64 + kRowsPerWarp * pw + i < num_win) {
          const uint8_t* src = attn::fp8_row(a, row) + lane * 16;
          cp_async16(dst, src, 16);
          if (lane == 0) cp_async16(dst + 512, src + 512, 16);
        } else if (lane < kKvFp4RowBytes / 16) {
          cp_async16(dst, a.extra_kv + static_cast<int64_t>(row) * kKvFp4RowBytes + lane * 16, 16);
        }
      }
    };

    // One block in format F, one row per step (one commit group per row; two rows per step
    // measured the same on the H200): the ring holds kDepth rows, in slots of 288 bytes for FP4
    // blocks (the FP4 rows are the random, high-latency ones: more of them in flight) or 528. A
    // run of blocks of one format streams through the ring; a block after a format change (or
    // the first of a query) starts its own copies (one memory latency).
    auto block = [&](auto f, int b) {
      constexpr int F = decltype(f)::value;
      constexpr int kStride = F == 2 ? kKvFp4RowBytes : kKvFp8RowBytes;
      constexpr int kDepth = kRingBytes / kStride;
      static_assert(kDepth >= 2 && kDepth < kRowsPerWarp, "ring depth");
      const int gb = gb0 + b, tile = gb & 1;
      const int32_t nn = block_indices(b + 2);
      if (b == 0 || format(b - 1) != F) {
        slot = 0;
#pragma unroll
        for (int i = 0; i < kDepth; ++i) {
          copy_row(b, i, __shfl_sync(0xffffffffu, cur, i), i, kStride);
          cp_async_commit();
        }
      }
      const bool stream_on = b + 1 < num_blocks && format(b + 1) == F;
      if (gb >= 2) mbar::wait(bars.empty(tile), ((gb >> 1) - 1) & 1);
      tr.mark(3, gb);
      uint8_t* ks = smem + SLayout::kK + tile * kTile;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int k = kRowsPerWarp * pw + i;
        const int32_t row = __shfl_sync(0xffffffffu, cur, i);
        cp_async_wait<kDepth - 1>();  // this row's group
        __syncwarp();
        const uint8_t* src = ring + slot * kStride;
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
        if (do_decode && row >= 0) {  // warp-uniform
          uint32_t v[8];
          if (F == 1 || (F == 0 && b * 64 + k < num_win)) {
            decode_fp8x16(*reinterpret_cast<const uint4*>(src + lane * 16), src[512 + lane / 2], v);
          } else {
            decode_fp4x16(*reinterpret_cast<const uint2*>(src + lane * 8), src[256 + lane], v);
          }
          lo = make_uint4(v[0], v[1], v[2], v[3]);
          hi = make_uint4(v[4], v[5], v[6], v[7]);
        }
        // Chunks 2l, 2l + 1; lanes of odd sub-tiles store the odd chunk first, so that each
        // store covers all eight 16-byte bank groups (4 wavefronts, not 8).
        const int odd = (lane >> 2) & 1;
        *reinterpret_cast<uint4*>(ks + sw128(k, 2 * lane + odd)) = odd ? hi : lo;
        *reinterpret_cast<uint4*>(ks + sw128(k, 2 * lane + 1 - odd)) = odd ? lo : hi;
        __syncwarp();  // every lane is done with the slot
        // The row kDepth later in the warp's sequence into the same slot (the next block's while
        // the format stays).
        const int i2 = i + kDepth;
        if (i2 < kRowsPerWarp) {
          copy_row(b, i2, __shfl_sync(0xffffffffu, cur, i2), slot, kStride);
        } else {
          const int32_t next = __shfl_sync(0xffffffffu, nxt, (i2 - kRowsPerWarp) & 31);
          copy_row(b + 1, i2 - kRowsPerWarp, stream_on ? next : -1, slot, kStride);
        }
        cp_async_commit();
        slot = slot + 1 == kDepth ? 0 : slot + 1;
      }
      const uint32_t valid = __ballot_sync(0xffffffffu, cur >= 0) & 0xffu;
      if (lane == 0) smem[SLayout::kValid + tile * 8 + pw] = static_cast<uint8_t>(valid);
      wg::fence_proxy_async();
      mbar::arrive(bars.full(tile));
      tr.mark(4, gb);
      cur = nxt;
      nxt = nn;
    };
    for (int b = 0; b < num_blocks; ++b) {
      switch (format(b)) {
        case 1:
          block(std::integral_constant<int, 1>{}, b);
          break;
        case 2:
          block(std::integral_constant<int, 2>{}, b);
          break;
        default:
          block(std::integral_constant<int, 0>{}, b);
          break;
      }
    }
  }
  cp_async_wait<0>();
}

#endif  // DI_WGMMA_ENABLED

}  // namespace di::backend::cuda::seesaw
