// The weight-streaming core of the few-row (decode) block-scaled GEMMs: one CTA owns CW output
// columns and streams their weight rows through shared memory in K chunks (a bulk-copy pipeline
// of 3-8 stages that runs on across segments: column tiles, row groups, matrices), together with
// each chunk's activations, activation scales and weight scales. Used by
// gemm_skinny.cu (dense FP8/FP4 linear) and moe_grouped.cu (FP4 experts with device-side counts).
//
// Numerics are the CPU's exactly (kernels/ref/gemm.cc): per output and 32-block the 8-lane
// dot_f32 order, times the activation scale, times the weight scale, added in K order, bf16 at
// the end. Two facts keep it bitwise while cheap:
// - a product of an e4m3 activation and an e4m3 or e2m1 weight has at most 8 significant bits
//   and lies far inside fp32's normal range, so it is exact and fma(a, w, l) == l + a * w
//   (one FFMA per element per row instead of FMUL + FADD);
// - FP4 codes are decoded as w * 2^-14 (their f16 bit pattern placed directly, which also covers
//   the subnormal code 0.5), so every product and lane sum is exactly 2^-14 times the CPU's; the
//   block sum is scaled back by an exact multiplication.
// Thread t computes (column t % CW, block t / CW + p * 256 / CW) block sums for every row; lanes
// of a warp share blocks, so the activation loads are shared-memory broadcasts. The K-order sum
// is a chain over per-chunk staged partials, run by one owner thread per (column, row) one chunk
// behind. The activations must be 16-byte aligned per row (K % 128 == 0 and 16-byte aligned
// bases: the bulk copies' rule), as cp.async already required of the weights.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/mma_e4m3.cuh"

namespace di::backend::cuda::skinny {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxRows = 8;  // rows per pass; more rows take several passes
constexpr int kMinStages = 3, kMaxStages = 8;

// Occupancy modes. One CTA per SM takes nearly all shared memory (deep stages, 4 (column, block)
// pairs per thread and chunk); two CTAs per SM take half each with 2 pairs per thread: twice the
// warps to hide each chunk's latency chain (decode, 8-lane dot, K-order sum, barrier).
template <int kCtas>
struct Mode {
  static_assert(kCtas == 1 || kCtas == 2, "one or two CTAs per SM");
  static constexpr int kPairs = kCtas == 1 ? 4 : 2;
  static constexpr int kBudget = kCtas == 1 ? 225 * 1024 : 112 * 1024;
};

// Compile-time shape of a column-tile variant with P (column, block) pairs per thread and chunk.
template <int CW, bool kFp4, int P>
struct Tile {
  static constexpr int kChunk = P * kThreads / CW;  // 32-blocks per K chunk
  static constexpr int kBlockBytes = kFp4 ? 16 : 32;
  static constexpr int kRowBytes = kChunk * kBlockBytes + 16;  // +16: spreads rows over banks
  static constexpr int kPairs = P;
  static_assert(CW * kMaxRows <= kThreads && kChunk % 4 == 0, "tile shape");
};

// Shared-memory carve-up for `rows` rows per pass (host and device agree on it): `stages`
// pipeline stages of weights + activations + scales, two buffers of block partials, then one
// mbarrier per stage (the weights' bulk copies).
struct Layout {
  int rows, stages, w_off, a_off, as_off, ws_off, stage_bytes, part_off, bar_off, total;
};

__host__ __device__ inline int align16(int x) {
  return (x + 15) & ~15;
}

__host__ __device__ inline Layout make_layout(int cw, bool fp4, int pairs, int rows, int budget) {
  const int chunk = pairs * kThreads / cw, bb = fp4 ? 16 : 32;
  Layout l{};
  l.rows = rows;
  l.w_off = 0;
  l.a_off = l.w_off + cw * (chunk * bb + 16);
  l.as_off = l.a_off + rows * chunk * 128;
  l.ws_off = l.as_off + rows * chunk * 4;
  l.stage_bytes = align16(l.ws_off + (fp4 ? cw * chunk : chunk));
  const int parts = align16(2 * rows * cw * (chunk + 1) * 4);
  int stages = (budget - parts - 8 * kMaxStages) / l.stage_bytes;
  stages = stages < kMinStages ? kMinStages : (stages > kMaxStages ? kMaxStages : stages);
  l.stages = stages;
  l.part_off = stages * l.stage_bytes;
  l.bar_off = l.part_off + parts;
  l.total = l.bar_off + 8 * stages;
  return l;
}

// The most rows per pass (<= kMaxRows) whose layout fits the shared-memory budget.
__host__ __device__ inline int max_rows_per_pass(int cw, bool fp4, int pairs, int budget) {
  int r = kMaxRows;
  while (r > 1 && make_layout(cw, fp4, pairs, r, budget).total > budget) --r;
  return r;
}

// cp.async.wait_group needs an immediate.
__device__ __forceinline__ void cp_async_wait_pending(int n) {
  switch (n) {
    case 1:
      cp_async_wait<1>();
      break;
    case 2:
      cp_async_wait<2>();
      break;
    case 3:
      cp_async_wait<3>();
      break;
    case 4:
      cp_async_wait<4>();
      break;
    case 5:
      cp_async_wait<5>();
      break;
    default:
      cp_async_wait<6>();
      break;
  }
}

// The 32 e4m3 bytes of one 32-block (two uint4) -> 32 exact floats.
__device__ __forceinline__ void decode_fp8(const uint4* p, float* out) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4 v = p[h];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint16_t pair = static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)));
      const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      const float2 f = __half22float2(__half2(r));
      out[16 * h + 2 * i] = f.x;
      out[16 * h + 2 * i + 1] = f.y;
    }
  }
}

// 16 bytes of e2m1 pairs (low nibble first) -> 32 floats equal to code * 2^-14: nibble bits
// s e1 e0 m placed at f16 bits 15 and 11..9 give exactly that f16 (exponent field e, mantissa m;
// e = 0 is the f16 subnormal m * 2^-15). Word i holds elements 8i..8i+7; nibbles p and p + 4
// are decoded as one f16 pair.
__device__ __forceinline__ void decode_fp4(const uint4* p, float* out) {
  const uint4 v = *p;
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t s = q < 3 ? words[i] << (9 - 4 * q) : words[i] >> 3;  // nibble q at 9..12
      const uint32_t h2 = (s & 0x0e000e00u) | ((s << 3) & 0x80008000u);
      __half2_raw r;
      r.x = static_cast<uint16_t>(h2);
      r.y = static_cast<uint16_t>(h2 >> 16);
      const float2 f = __half22float2(__half2(r));
      out[8 * i + q] = f.x;
      out[8 * i + q + 4] = f.y;
    }
  }
}

__device__ __forceinline__ float combine8(const float* l) {
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                   __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
}

// One unit of streamed work: CW columns from n0 of weight w for num_rows activation rows. Row r
// of the segment is activation row rows[row0 + r] when `rows` is set (a gather), else row0 + r.
struct Segment {
  const float* q;        // act_quant values [*, K]
  const float* a_scale;  // [*, K / 32]
  const int32_t* rows;   // nullable
  int64_t row0;
  int num_rows;  // 1..Layout::rows
  const uint8_t* w;
  const uint8_t* w_scale;
  int64_t N, n0;
};

// Streams `num_segments` segments (all with the same K) through one software pipeline, so that
// a CTA's loads run ahead across segment boundaries. seg(s) must be cheap and the same in every
// thread; done(s, c, m, acc) is called once segment s is summed, by the one thread that owns
// output (n0 + c, row m) (m < num_rows), with acc its K-order sum (unrounded); an owner keeps its
// (c, m) for every segment of the call.
//
// Per chunk: the weights' rows, the activation rows and their scales arrive by bulk copies that
// the last warp issues (one per row, on the stage's mbarrier), the weight scales by 4-byte
// cp.async; one
// __syncthreads per chunk. The K-order chains of the previous chunk (thread q < CW * rows owns
// chain q) are interleaved with this chunk's block sums, off the barrier's critical path.
template <int CW, bool kFp4, int P, class SegFn, class DoneFn>
__device__ void stream(
    unsigned char* smem, const Layout& L, int64_t K, int num_segments, SegFn seg, DoneFn done) {
  using T = Tile<CW, kFp4, P>;
  constexpr int kc = T::kChunk, bb = T::kBlockBytes;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int nblk = static_cast<int>(K / 32);
  const int nchunks = (nblk + kc - 1) / kc;
  const int total = num_segments * nchunks;
  const int64_t wrow_bytes = K * bb / 32;
  float* part = reinterpret_cast<float*>(smem + L.part_off);
  const int part_buf = L.rows * CW * (kc + 1);
  const uint32_t bar0 = mbar::smem_u32(smem + L.bar_off);
  // Chain owner: thread q owns chain q = m * CW + c (consecutive lanes: their partial rows,
  // kc + 1 floats apart, fall in distinct banks; the fewest warps carry chain work).
  const int q = tid;
  const bool owner = q < CW * L.rows;
  const int qc = q % CW, qm = q / CW;

  if (tid == 0) {
    for (int i = 0; i < L.stages; ++i) mbar::init(bar0 + 8 * i, 1);
    mbar::init_fence();
  }
  pdl::release_next_grid();
  __syncthreads();

  // Item k = chunk `chunk` of segment s, in stage `slot`: its weights (rows and scales, one
  // cp.async group) and/or its activations (rows and scales).
  auto issue = [&](int k, int s, int chunk, int slot, bool weights, bool acts) {
    if (k < total) {
      const Segment g = seg(s);
      unsigned char* st = smem + slot * L.stage_bytes;
      const int b0 = chunk * kc, nb = min(kc, nblk - b0);
      // The last warp moves the weight rows (lane c: column c), then each activation row and its
      // scales (lane r, lane 8 + r) by bulk copies: a handful of instructions per chunk (the
      // chain owners sit in the first warps, so the extra work is spread).
      if (warp == kWarps - 1) {
        const uint32_t bar = bar0 + 8 * slot;
        if (weights && lane == 0) {
          mbar::arrive_expect_tx(bar, (CW * bb + g.num_rows * 132) * nb);
        }
        __syncwarp();
        if (weights && lane < CW) {
          const int64_t n = g.n0 + lane < g.N ? g.n0 + lane : g.N - 1;  // past N: not stored
          bulk::copy(mbar::smem_u32(st + L.w_off + lane * T::kRowBytes),
                     g.w + n * wrow_bytes + int64_t{b0} * bb, nb * bb, bar);
        }
        const int r = lane % kMaxRows;
        if (acts && lane < 2 * kMaxRows && r < g.num_rows) {
          const int64_t row = g.rows ? int64_t{g.rows[g.row0 + r]} : g.row0 + r;
          if (lane < kMaxRows) {
            bulk::copy(mbar::smem_u32(st + L.a_off + r * kc * 128), g.q + row * K + b0 * 32,
                       nb * 128, bar);
          } else {
            bulk::copy(mbar::smem_u32(st + L.as_off + r * kc * 4), g.a_scale + row * nblk + b0,
                       nb * 4, bar);
          }
        }
      }
      // Weight scales, 4 bytes per copy (nblk % 4 == 0 and kc % 4 == 0 keep them aligned).
      if (weights && kFp4) {
        for (int i = tid; i < CW * (kc / 4); i += kThreads) {
          const int c = i / (kc / 4), p = i % (kc / 4);
          const int64_t n = g.n0 + c < g.N ? g.n0 + c : g.N - 1;
          if (4 * p < nb) {
            cp_async4(st + L.ws_off + c * kc + p * 4, g.w_scale + n * nblk + b0 + p * 4, 4);
          }
        }
      } else if (weights) {
        const int i = tid - (kWarps - 2) * 32;  // the second-to-last warp
        if (i >= 0 && i < kc / 4 && 4 * i < nb) {
          cp_async4(st + L.ws_off + i * 4, g.w_scale + (g.n0 / 32) * nblk + b0 + i * 4, 4);
        }
      }
    }
    if (weights) cp_async_commit();
  };

  float acc = 0.0f;  // the owner's K-order sum for (qc, qm) of the current segment
  // Adds partials j0 .. j1 - 1 (of nb) of the chunk whose partials are in buffer `buf`.
  auto chain = [&](int buf, int nb, int j0, int j1) {
    const float* pp = part + buf * part_buf + q * (kc + 1);
#pragma unroll
    for (int j = j0; j < j1; ++j) {
      if (j < nb) acc = __fadd_rn(acc, pp[j]);
    }
  };

  // Block sums of item k into partial buffer k & 1; interleaved with them, the chain pieces of
  // item k - 1 (prev_nb blocks; prev_chain: this thread owns a live chain of it).
  auto compute = [&](int k, int s, int chunk, int slot, bool prev_chain, int prev_nb) {
    const int R = seg(s).num_rows;
    const unsigned char* st = smem + slot * L.stage_bytes;
    const int nb = min(kc, nblk - chunk * kc);
    const int c = tid % CW;
    const float* as_s = reinterpret_cast<const float*>(st + L.as_off);
    float* pb = part + (k & 1) * part_buf;
#pragma unroll
    for (int pi = 0; pi < P; ++pi) {
      if (prev_chain) chain((k + 1) & 1, prev_nb, pi * (kc / P), (pi + 1) * (kc / P));
      const int j = tid / CW + pi * (kThreads / CW);
      if (j >= nb) continue;
      float wv[32];
      const uint4* raw = reinterpret_cast<const uint4*>(st + L.w_off + c * T::kRowBytes + j * bb);
      if (kFp4) {
        decode_fp4(raw, wv);
      } else {
        decode_fp8(raw, wv);
      }
      const float ws = e8m0_to_float(st[L.ws_off + (kFp4 ? c * kc + j : j)]);
      for (int m = 0; m < R; ++m) {
        const float4* av = reinterpret_cast<const float4*>(st + L.a_off + (m * kc + j) * 128);
        float l[8];
        {
          const float4 x0 = av[0], x1 = av[1];
          l[0] = __fmaf_rn(x0.x, wv[0], 0.0f);
          l[1] = __fmaf_rn(x0.y, wv[1], 0.0f);
          l[2] = __fmaf_rn(x0.z, wv[2], 0.0f);
          l[3] = __fmaf_rn(x0.w, wv[3], 0.0f);
          l[4] = __fmaf_rn(x1.x, wv[4], 0.0f);
          l[5] = __fmaf_rn(x1.y, wv[5], 0.0f);
          l[6] = __fmaf_rn(x1.z, wv[6], 0.0f);
          l[7] = __fmaf_rn(x1.w, wv[7], 0.0f);
        }
#pragma unroll
        for (int u = 1; u < 4; ++u) {
          const float4 x0 = av[2 * u], x1 = av[2 * u + 1];
          l[0] = __fmaf_rn(x0.x, wv[8 * u + 0], l[0]);
          l[1] = __fmaf_rn(x0.y, wv[8 * u + 1], l[1]);
          l[2] = __fmaf_rn(x0.z, wv[8 * u + 2], l[2]);
          l[3] = __fmaf_rn(x0.w, wv[8 * u + 3], l[3]);
          l[4] = __fmaf_rn(x1.x, wv[8 * u + 4], l[4]);
          l[5] = __fmaf_rn(x1.y, wv[8 * u + 5], l[5]);
          l[6] = __fmaf_rn(x1.z, wv[8 * u + 6], l[6]);
          l[7] = __fmaf_rn(x1.w, wv[8 * u + 7], l[7]);
        }
        float d = combine8(l);
        if (kFp4) d = __fmul_rn(d, 16384.0f);  // undo the decode's 2^-14 (exact)
        pb[(m * CW + c) * (kc + 1) + j] = __fmul_rn(__fmul_rn(d, as_s[m * kc + j]), ws);
      }
    }
  };

  // Item counters advance incrementally (no divisions in the loop).
  int is = 0, ic = 0, islot = 0;  // next item to issue
  auto issue_next = [&](int k) {
    issue(k, is, ic, islot, true, true);
    if (++ic == nchunks) ic = 0, ++is;
    if (++islot == L.stages) islot = 0;
  };
  // The weights do not depend on the previous kernel: the first stages' weights are requested
  // before waiting for it (programmatic dependent launch), their activations after.
  for (int k = 0; k < L.stages - 1; ++k) {
    issue(k, is, ic, k, true, false);
    if (++ic == nchunks) ic = 0, ++is;
  }
  pdl::wait_for_previous_grid();
  for (int k = 0, s = 0, c = 0; k < L.stages - 1; ++k) {
    issue(k, s, c, k, false, true);
    if (++c == nchunks) c = 0, ++s;
  }
  islot = L.stages - 1;
  uint32_t phases = 0;  // bit i: parity of stage i's next completion
  int cs = 0, cc = 0, cslot = 0, ps = 0, pc = 0, pnb = 0;  // item k, and item k - 1
#pragma unroll 1
  for (int k = 0; k < total; ++k) {
    cp_async_wait_pending(L.stages - 2);
    mbar::wait(bar0 + 8 * cslot, (phases >> cslot) & 1u);
    phases ^= 1u << cslot;
    __syncthreads();  // item k landed for every thread; k - 1 computed, its stage free
    issue_next(k + L.stages - 1);
    const bool prev_chain = k > 0 && owner && qm < seg(ps).num_rows;
    compute(k, cs, cc, cslot, prev_chain, pnb);
    if (k > 0 && pc == nchunks - 1) {
      if (prev_chain) done(ps, qc, qm, acc);
      acc = 0.0f;
    }
    ps = cs;
    pc = cc;
    pnb = min(kc, nblk - cc * kc);
    if (++cc == nchunks) cc = 0, ++cs;
    if (++cslot == L.stages) cslot = 0;
  }
  cp_async_wait<0>();
  __syncthreads();
  if (total > 0 && owner && qm < seg(ps).num_rows) {
    chain((total - 1) & 1, pnb, 0, kc);
    done(ps, qc, qm, acc);
  }
  __syncthreads();  // a later call may overwrite the partials and stages
  if (tid == 0) {
    for (int i = 0; i < L.stages; ++i) mbar::inval(bar0 + 8 * i);
  }
}

}  // namespace di::backend::cuda::skinny
