// The producer warpgroups of the seesaw kernel's gather mode (sparse_attention_key_table.h): each
// key block's rows copied from the key table into the bf16 key tile with cp.async, instead of
// loaded and decoded per row (sparse_attention_seesaw_producer.cuh). A copied row holds the
// words the decoders would have written, so the consumers and the output bits are the same.
// sm_90a device code only.
#pragma once

#include "backend/cuda/sparse_attention_seesaw_producer.cuh"

namespace di::backend::cuda::seesaw {

#if DI_WGMMA_ENABLED

// 16 bytes global -> shared, through L2 only (a table row is read by the blocks of many SMs,
// each once).
__device__ __forceinline__ void cp_async_l2(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// One arrival on `bar` once this thread's cp.async copies issued so far have landed (.noinc: it
// is one of the phase's expected arrivals, so in gather mode `full` expects two a producer
// thread: this one, and the thread's own after its other stores). The form without .noinc
// (which raises the count instead) gave the same bits, but synccheck reported a missing wait.
__device__ __forceinline__ void cp_async_track(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// A row past the table's capacity (key row ~code, code = index | format << 30): this lane's 16
// dims loaded and decoded from the pool into chunks 2 lane and 2 lane + 1 of tile row r, as the
// default producers do.
__device__ __forceinline__ void decode_pool_row(
    const SparseAttentionFp8Args& a, int32_t code, uint8_t* tile, int r, int lane) {
  uint32_t v[8];
  attn::decode_stored_row(a, (code >> 30) == 0, code & ((1 << 30) - 1), lane, v);
  *reinterpret_cast<uint4*>(tile + sw128(r, 2 * lane)) = make_uint4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<uint4*>(tile + sw128(r, 2 * lane + 1)) = make_uint4(v[4], v[5], v[6], v[7]);
}

// The producer warpgroups (threads 256..511) in gather mode, over the same blocks in the same
// order as produce(): warp pw fills rows 8 pw .. 8 pw + 7 of each key block, lane l chunks l and
// l + 32 of each row (one 512-byte run of the table row per warp instruction). The copies are
// asynchronous, so the warp does not wait for them: the block's `full` phase does
// (cp_async_track), and the warp goes on to the next block's indices and its wait on `empty`.
template <bool kTrace>
__device__ __forceinline__ void produce_gather(const SparseAttentionFp8Args& a,
                                               uint8_t* smem,
                                               const Bars& bars,
                                               int num_blocks) {
  const int ptid = threadIdx.x - 256, pw = ptid >> 5, lane = threadIdx.x & 31;
  const int num_keys = a.num_indices + a.num_extra;
  if (num_blocks <= 0) return;
  Trace<kTrace> tr(a, smem, 2);
  // Lane i < 8 holds the key row of the warp's row i in block b of query t (0 past the end).
  auto block_rows = [&](int t, int b) {
    const int j = b * 64 + kRowsPerWarp * pw + lane;
    return lane < kRowsPerWarp && t < a.num_queries && j < num_keys
               ? __ldg(a.key_rows + static_cast<int64_t>(t) * num_keys + j)
               : 0;
  };
  int t = blockIdx.x, b = 0;
  auto later_rows = [&](int k) {
    int bk = b + k, tk = t;
    while (bk >= num_blocks) {
      bk -= num_blocks;
      tk += gridDim.x;
    }
    return block_rows(tk, bk);
  };
  // Chunk `lane` of row 8 pw + i sits at (lane / 8) * 8192 + (8 pw + i) * 128 + ((lane % 8) ^ i)
  // * 16 (sw128); chunk lane + 32 four sub-tiles later.
  const uint32_t lane_dst = smem_addr(smem + SLayout::kK) + (lane >> 3) * 8192 +
                            kRowsPerWarp * pw * 128 + ((lane & 7) << 4);
  const uint8_t* const lane_src = reinterpret_cast<const uint8_t*>(a.key_table) + 16 * lane;
  int32_t cur = block_rows(t, b), nxt = later_rows(1);
  for (int gb = 0; t < a.num_queries; ++gb) {
    const int tile = gb & 1;
    if (b == 0) tr.mark(1, gb);
    if (gb >= 2) mbar::wait(bars.empty(tile), ((gb >> 1) - 1) & 1);
    tr.mark(3, gb);
    const int32_t nn = later_rows(2);  // (its load overlaps the copies' issue)
    const uint32_t dst = lane_dst + tile * kTile;
    bool pool_rows = false;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int32_t row = __shfl_sync(0xffffffffu, cur, i);
      if (row >= 0) {
        const uint8_t* src = lane_src + static_cast<int64_t>(row) * (kKvDim * 2);
        const uint32_t d = (dst ^ (i << 4)) + i * 128;
        cp_async_l2(d, src);
        cp_async_l2(d + 4 * 8192, src + 512);
      } else {
        pool_rows = true;
      }
    }
    cp_async_track(bars.full(tile));
    if (pool_rows) {  // rare: rows past the table's capacity, decoded here
      uint8_t* ks = smem + SLayout::kK + tile * kTile;
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int32_t row = __shfl_sync(0xffffffffu, cur, i);
        if (row < 0) decode_pool_row(a, ~row, ks, kRowsPerWarp * pw + i, lane);
      }
    }
    const uint32_t valid = __ballot_sync(0xffffffffu, cur != 0) & 0xffu;
    if (lane == 0) smem[SLayout::kValid + tile * 8 + pw] = static_cast<uint8_t>(valid);
    mbar::arrive(bars.full(tile));
    tr.mark(4, gb);
    cur = nxt;
    nxt = nn;
    if (++b == num_blocks) {
      b = 0;
      t += gridDim.x;
    }
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  tr.flush(a, smem, 2);
}

#endif  // DI_WGMMA_ENABLED

}  // namespace di::backend::cuda::seesaw
