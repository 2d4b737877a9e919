// The weight-streaming core of the few-row (decode) block-scaled GEMMs: one CTA owns CW output
// columns and streams their weight rows through shared memory in K chunks (a cp.async pipeline
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
// is a chain over per-chunk staged partials, run by thread (column, row) one chunk behind.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/mma_e4m3.cuh"

namespace di::backend::cuda::skinny {

constexpr int kThreads = 256;
constexpr int kMaxRows = 8;     // rows per pass; more rows take several passes
constexpr int kActStride = 36;  // floats per staged 32-element block: skews blocks across banks
constexpr int kMinStages = 3, kMaxStages = 8;
constexpr int kSmemBudget = 225 * 1024;  // one CTA per SM: deep stages instead of more CTAs

// Compile-time shape of a column-tile variant.
template <int CW, bool kFp4>
struct Tile {
  static constexpr int kChunk = 1024 / CW;  // 32-blocks per K chunk: 4 (column, block) per thread
  static constexpr int kBlockBytes = kFp4 ? 16 : 32;
  static constexpr int kRowBytes = kChunk * kBlockBytes + 16;  // +16: spreads rows over banks
  static constexpr int kPieces = kChunk * kBlockBytes / 16;    // 16-byte copies per row
  static constexpr int kPairs = CW * kChunk / kThreads;        // (column, block) per thread
  static_assert(kPairs >= 1 && CW * kMaxRows <= kThreads, "tile shape");
  static_assert(CW * kPieces % kThreads == 0, "whole copy rounds");
};

// Shared-memory carve-up for `rows` rows per pass (host and device agree on it): `stages`
// pipeline stages of weights + activations + scales, then two buffers of block partials.
struct Layout {
  int rows, stages, w_off, a_off, as_off, ws_off, stage_bytes, part_off, total;
};

__host__ __device__ inline int align16(int x) {
  return (x + 15) & ~15;
}

__host__ __device__ inline Layout make_layout(int cw, bool fp4, int rows) {
  const int chunk = 1024 / cw, bb = fp4 ? 16 : 32;
  Layout l{};
  l.rows = rows;
  l.w_off = 0;
  l.a_off = l.w_off + cw * (chunk * bb + 16);
  l.as_off = l.a_off + rows * chunk * kActStride * 4;
  l.ws_off = l.as_off + rows * chunk * 4;
  l.stage_bytes = align16(l.ws_off + (fp4 ? cw * chunk : chunk));
  const int parts = 2 * rows * cw * (chunk + 1) * 4;
  int stages = (kSmemBudget - parts) / l.stage_bytes;
  stages = stages < kMinStages ? kMinStages : (stages > kMaxStages ? kMaxStages : stages);
  l.stages = stages;
  l.part_off = stages * l.stage_bytes;
  l.total = l.part_off + parts;
  return l;
}

// The most rows per pass (<= kMaxRows) whose layout fits the shared-memory budget.
__host__ __device__ inline int max_rows_per_pass(int cw, bool fp4) {
  int r = kMaxRows;
  while (r > 1 && make_layout(cw, fp4, r).total > kSmemBudget) --r;
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
// thread; done(s, acc) is called by every thread once segment s is summed, with acc the K-order
// sum (unrounded) of output (n0 + t % CW, row t / CW) in thread t < CW * num_rows.
template <int CW, bool kFp4, class SegFn, class DoneFn>
__device__ void stream(
    unsigned char* smem, const Layout& L, int64_t K, int num_segments, SegFn seg, DoneFn done) {
  using T = Tile<CW, kFp4>;
  constexpr int kc = T::kChunk, bb = T::kBlockBytes;
  const int tid = threadIdx.x;
  const int nblk = static_cast<int>(K / 32);
  const int nchunks = (nblk + kc - 1) / kc;
  const int total = num_segments * nchunks;
  const int64_t wrow_bytes = K * bb / 32;
  float* part = reinterpret_cast<float*>(smem + L.part_off);

  // Item k = chunk `chunk` of segment s, in stage `slot`.
  auto issue = [&](int k, int s, int chunk, int slot) {
    if (k < total) {
      const Segment g = seg(s);
      unsigned char* st = smem + slot * L.stage_bytes;
      const int b0 = chunk * kc, nb = min(kc, nblk - b0);
      const int pieces = nb * bb / 16;
#pragma unroll
      for (int u = 0; u < CW * T::kPieces / kThreads; ++u) {
        const int i = tid + u * kThreads, c = i / T::kPieces, p = i % T::kPieces;
        const int64_t n = g.n0 + c < g.N ? g.n0 + c : g.N - 1;  // past N: any row, not stored
        if (p < pieces) {
          cp_async16(st + L.w_off + c * T::kRowBytes + p * 16,
                     g.w + n * wrow_bytes + int64_t{b0} * bb + p * 16, 16);
        }
      }
      for (int i = tid; i < g.num_rows * kc * 8; i += kThreads) {
        const int r = i / (kc * 8), b = (i / 8) % kc, p = i % 8;
        if (b < nb) {
          const int64_t row = g.rows ? int64_t{g.rows[g.row0 + r]} : g.row0 + r;
          cp_async16(st + L.a_off + ((r * kc + b) * kActStride + p * 4) * 4,
                     g.q + row * K + (b0 + b) * 32 + p * 4, 16);
        }
      }
      for (int i = tid; i < g.num_rows * kc; i += kThreads) {
        const int r = i / kc, b = i % kc;
        if (b < nb) {
          const int64_t row = g.rows ? int64_t{g.rows[g.row0 + r]} : g.row0 + r;
          cp_async4(st + L.as_off + (r * kc + b) * 4, g.a_scale + row * nblk + b0 + b, 4);
        }
      }
      // Weight scales, 4 bytes per copy (nblk % 4 == 0 and kc % 4 == 0 keep them aligned).
      if (kFp4) {
        for (int i = tid; i < CW * (kc / 4); i += kThreads) {
          const int c = i / (kc / 4), p = i % (kc / 4);
          const int64_t n = g.n0 + c < g.N ? g.n0 + c : g.N - 1;
          if (4 * p < nb) {
            cp_async4(st + L.ws_off + c * kc + p * 4, g.w_scale + n * nblk + b0 + p * 4, 4);
          }
        }
      } else if (tid < kc / 4 && 4 * tid < nb) {
        cp_async4(st + L.ws_off + tid * 4, g.w_scale + (g.n0 / 32) * nblk + b0 + tid * 4, 4);
      }
    }
    cp_async_commit();
  };

  float acc = 0.0f;  // thread (c, m): row m's K-order sum for column c of the current segment
  auto chain = [&](int k, int s, int chunk) {
    const Segment g = seg(s);
    if (tid < CW * g.num_rows) {
      const int nb = min(kc, nblk - chunk * kc);
      const float* p = part + ((k & 1) * L.rows * CW + tid) * (kc + 1);
      // Unrolled so that the loads issue ahead of the dependent adds (this chain is on the
      // critical path of the barrier that follows).
#pragma unroll 16
      for (int j = 0; j < nb; ++j) acc = __fadd_rn(acc, p[j]);
    }
    if (chunk == nchunks - 1) {
      done(s, acc);
      acc = 0.0f;
    }
  };

  auto compute = [&](int k, int s, int chunk, int slot) {
    const int R = seg(s).num_rows;
    const unsigned char* st = smem + slot * L.stage_bytes;
    const int nb = min(kc, nblk - chunk * kc);
    const int c = tid % CW;
    const float* as_s = reinterpret_cast<const float*>(st + L.as_off);
    float* pb = part + (k & 1) * L.rows * CW * (kc + 1);
#pragma unroll
    for (int pi = 0; pi < T::kPairs; ++pi) {
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
        const float4* av =
            reinterpret_cast<const float4*>(st + L.a_off + (m * kc + j) * kActStride * 4);
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
        for (int q = 1; q < 4; ++q) {
          const float4 x0 = av[2 * q], x1 = av[2 * q + 1];
          l[0] = __fmaf_rn(x0.x, wv[8 * q + 0], l[0]);
          l[1] = __fmaf_rn(x0.y, wv[8 * q + 1], l[1]);
          l[2] = __fmaf_rn(x0.z, wv[8 * q + 2], l[2]);
          l[3] = __fmaf_rn(x0.w, wv[8 * q + 3], l[3]);
          l[4] = __fmaf_rn(x1.x, wv[8 * q + 4], l[4]);
          l[5] = __fmaf_rn(x1.y, wv[8 * q + 5], l[5]);
          l[6] = __fmaf_rn(x1.z, wv[8 * q + 6], l[6]);
          l[7] = __fmaf_rn(x1.w, wv[8 * q + 7], l[7]);
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
    issue(k, is, ic, islot);
    if (++ic == nchunks) ic = 0, ++is;
    if (++islot == L.stages) islot = 0;
  };
  for (int k = 0; k < L.stages - 1; ++k) issue_next(k);
  int cs = 0, cc = 0, cslot = 0, ps = 0, pc = 0;  // item k, and item k - 1
#pragma unroll 1
  for (int k = 0; k < total; ++k) {
    cp_async_wait_pending(L.stages - 2);
    __syncthreads();  // item k landed for every thread; k - 1 computed, its stage free
    issue_next(k + L.stages - 1);
    if (k > 0) chain(k - 1, ps, pc);
    compute(k, cs, cc, cslot);
    ps = cs;
    pc = cc;
    if (++cc == nchunks) cc = 0, ++cs;
    if (++cslot == L.stages) cslot = 0;
  }
  cp_async_wait<0>();
  __syncthreads();
  if (total > 0) chain(total - 1, ps, pc);
  __syncthreads();  // a later call may overwrite the partials and stages
}

}  // namespace di::backend::cuda::skinny
