// Second kernel of the split path (sparse_attention_split.cu): softmax and PV over the logits
// and decoded keys that the first kernel left in the workspace, one block per (query, H heads,
// kDs value dims). Same step functions as the one-block kernel, so the same bits.
#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_combine.h"
#include "backend/cuda/sparse_attention_steps.cuh"

namespace di::backend::cuda {

namespace {

using attn::kBlockKeys;
using attn::kThreads;

// Kernel 2: block (t, y, z): heads [H y, H y + H) x value dims [kDs z, kDs z + kDs), warps tiled
// as the one-block kernel's H-head variant for the softmax. Key blocks stream through a ring of
// kStages stages (values [64][kDs] bf16, logits [H][64] fp32).
constexpr int kDs = 128;
constexpr int kVChunks = kDs / 8;
constexpr int kStages = 4;
constexpr int kSRow = 68;  // floats per logit row (padded against bank conflicts)
constexpr int kStageV = kBlockKeys * kDs * 2;

template <int H>
struct CombineLayout {
  static constexpr int kStageBytes = kStageV + H * kSRow * 4;
  static constexpr int kPs = kStages * kStageBytes;
  static constexpr int kMax = kPs + H * kBlockKeys * 2;
  static constexpr int kSum = kMax + attn::Split<H>::kWk * H * 4;
  static constexpr int kBytes = kSum + H * 8 * 4;
};

template <int H>
__global__ void __launch_bounds__(kThreads)
    split_combine_kernel(SparseAttentionFp8Args a, const float* sg, const uint16_t* kg, int nkp) {
  using L = CombineLayout<H>;
  using S = attn::Split<H>;
  constexpr int kDimsPerWarp = kDs / S::kWk;
  constexpr int kNtO = kDimsPerWarp / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ps = smem + L::kPs;
  float* red_max = reinterpret_cast<float*>(smem + L::kMax);
  float* red_sum = reinterpret_cast<float*>(smem + L::kSum);
  const int t = blockIdx.x, head0 = blockIdx.y * H, d0 = blockIdx.z * kDs;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp % S::kRowGroups, wk = warp / S::kRowGroups;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = rg * 16 + g, row1 = row0 + 8;
  const int num_blocks = (a.num_indices + a.num_extra + kBlockKeys - 1) / kBlockKeys;
  const uint16_t* kq = kg + static_cast<int64_t>(t) * nkp * kKvDim + d0;
  const float* sq = sg + (static_cast<int64_t>(t) * kAttnHeads + head0) * nkp;
  auto issue = [&](int b) {
    uint8_t* st = smem + (b % kStages) * L::kStageBytes;
    for (int u = threadIdx.x; u < kBlockKeys * kVChunks; u += kThreads) {
      const int r = u / kVChunks, c = u % kVChunks;
      cp_async16(st + swz(r, c, kVChunks),
                 kq + static_cast<int64_t>(b * kBlockKeys + r) * kKvDim + c * 8, 16);
    }
    for (int u = threadIdx.x; u < H * 16; u += kThreads) {  // H rows x 16 chunks of logits
      const int r = u / 16, c = u % 16;
      cp_async16(st + kStageV + (r * kSRow + c * 4) * 4,
                 sq + static_cast<int64_t>(r) * nkp + b * kBlockKeys + c * 4, 16);
    }
  };
  pdl::wait_for_previous_grid();  // the scores kernel's logits and keys (programmatic launch)
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < num_blocks) issue(i);
    cp_async_commit();
  }
  const int key0 = wk * S::kKeysPerWarp;
  float m_run[2] = {-1e30f, -1e30f};
  float l_run[2] = {0.0f, 0.0f};
  float o[kNtO][4];
#pragma unroll
  for (int n = 0; n < kNtO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const uint32_t ps_a = smem_addr(ps);
  for (int b = 0; b < num_blocks; ++b) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage b landed; every warp is done with stage b - 1
    const uint8_t* st = smem + (b % kStages) * L::kStageBytes;
    const float* sl = reinterpret_cast<const float*>(st + kStageV);
    float s[S::kNtS][4];
#pragma unroll
    for (int n = 0; n < S::kNtS; ++n) {
      const int key = key0 + 8 * n + 2 * tq;
      s[n][0] = sl[row0 * kSRow + key];
      s[n][1] = sl[row0 * kSRow + key + 1];
      s[n][2] = sl[row1 * kSRow + key];
      s[n][3] = sl[row1 * kSRow + key + 1];
    }
    float rescale[2];
    attn::block_softmax<H, S::kNtS>(s, m_run, l_run, rescale, red_max, red_sum, ps, rg, wk, key0);
    if (b + kStages - 1 < num_blocks) issue(b + kStages - 1);  // into stage b - 1: free
    cp_async_commit();
    attn::block_pv<kNtO, kVChunks>(o, rescale, ps_a, smem_addr(st), rg, wk * kNtO, true);
  }
  cp_async_wait<0>();
  float inv[2];
  attn::final_denominators(inv, l_run, m_run, a.sink, head0 + row0, head0 + row1);
  uint16_t* out0 = a.out + (static_cast<int64_t>(t) * kAttnHeads + head0 + row0) * kKvDim + d0;
  uint16_t* out1 = out0 + 8 * kKvDim;
#pragma unroll
  for (int n = 0; n < kNtO; ++n) {
    const int col = wk * kDimsPerWarp + 8 * n + 2 * tq;
    *reinterpret_cast<uint32_t*>(out0 + col) = attn::final_pair(o[n][0], o[n][1], inv[0]);
    *reinterpret_cast<uint32_t*>(out1 + col) = attn::final_pair(o[n][2], o[n][3], inv[1]);
  }
}

// Kernel 2 for a few queries with at most kPreMaxKeys keys, 16 heads per block: the same
// arithmetic reordered so that the per-key-block chain is only the PV MMAs. All logits come in
// at once; the block maxima, the running maxima and rescales (a max is exact in any order), p
// and the 8-key group sums (block_softmax's tree) are computed for every key block in parallel;
// then the value blocks stream through the ring for the PV chain, with block_pv as above.
constexpr int kPreMaxKeys = 1024;

__global__ void __launch_bounds__(kThreads) split_combine_pre_kernel(SparseAttentionFp8Args a,
                                                                     const float* sg,
                                                                     const uint16_t* kg,
                                                                     int nkp) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int nb = nkp / kBlockKeys, sr = nkp + 4;                 // logit row stride (floats)
  float* sl = reinterpret_cast<float*>(smem);                    // [16][sr]
  uint8_t* pt = smem + 16 * sr * 4;                              // nb P tiles [16][8 chunks]
  uint8_t* vr = pt + nb * 16 * kBlockKeys * 2;                   // value ring
  float* mb = reinterpret_cast<float*>(vr + kStages * kStageV);  // [16][nb] maxima
  float* rs = mb + 16 * nb;                                      // [16][nb] rescales
  float* gs = rs + 16 * nb;                                      // [16][nb][8] group sums
  const int t = blockIdx.x, head0 = blockIdx.y * 16, d0 = blockIdx.z * kDs;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const uint16_t* kq = kg + static_cast<int64_t>(t) * nkp * kKvDim + d0;
  const float* sq = sg + (static_cast<int64_t>(t) * kAttnHeads + head0) * nkp;
  pdl::wait_for_previous_grid();  // the scores kernel's logits and keys (programmatic launch)
  // Few instructions per copy (ncu: this kernel is issue-bound at 2 warps per scheduler).
  for (int r = 0; r < 16; ++r) {
    for (int c = threadIdx.x; c < nkp / 4; c += kThreads) {
      cp_async16(sl + r * sr + c * 4, sq + static_cast<int64_t>(r) * nkp + c * 4, 16);
    }
  }
  cp_async_commit();
  // Value chunks: thread x copies rows x / 16 + 16 i, chunk x % 16 of every block.
  constexpr int kVPer = kBlockKeys * kVChunks / kThreads;
  const uint16_t* vsrc = kq + (threadIdx.x / kVChunks) * kKvDim + (threadIdx.x % kVChunks) * 8;
  uint32_t vdst[kVPer];
#pragma unroll
  for (int i = 0; i < kVPer; ++i) {
    vdst[i] =
        swz(threadIdx.x / kVChunks + i * (kThreads / kVChunks), threadIdx.x % kVChunks, kVChunks);
  }
  auto issue = [&](int b) {
    uint8_t* st = vr + (b % kStages) * kStageV;
    const uint16_t* src = vsrc + static_cast<int64_t>(b) * kBlockKeys * kKvDim;
#pragma unroll
    for (int i = 0; i < kVPer; ++i) {
      cp_async16(st + vdst[i], src + i * (kThreads / kVChunks) * kKvDim, 16);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < nb) issue(i);
    cp_async_commit();
  }
  cp_async_wait<kStages - 1>();  // the logits
  __syncthreads();
  // Block maxima: 4 lanes per (row, block), 16 logits each, then two shuffles (exact).
  for (int base = 0; base < 16 * nb * 4; base += kThreads) {
    const int u = base + threadIdx.x, q = u & 3, r = (u >> 2) & 15, b = u >> 6;
    float m = -INFINITY;
    if (b < nb) {
      const float4* x = reinterpret_cast<const float4*>(sl + r * sr + b * kBlockKeys + q * 16);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float4 v = x[k];
        m = fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
      }
    }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    if (b < nb && q == 0) mb[r * nb + b] = m;
  }
  __syncthreads();
  if (threadIdx.x < 16) {
    float run = -1e30f;  // block_softmax's m_run / rescale recurrence
    for (int b = 0; b < nb; ++b) {
      const float m_new = fmaxf(run, mb[threadIdx.x * nb + b]);
      rs[threadIdx.x * nb + b] = exp2_approx(__fsub_rn(run, m_new));
      mb[threadIdx.x * nb + b] = m_new;
      run = m_new;
    }
  }
  __syncthreads();
  for (int u = threadIdx.x; u < 16 * nb * 8; u += kThreads) {
    const int grp = u % 8, r = (u / 8) % 16, b = u / 128;
    const float m = mb[r * nb + b];
    const float4* x = reinterpret_cast<const float4*>(sl + r * sr + b * kBlockKeys + grp * 8);
    const float4 x0 = x[0], x1 = x[1];
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    float p[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) p[k] = exp2_approx(__fsub_rn(xs[k], m));
    gs[(r * nb + b) * 8 + grp] = __fadd_rn(__fadd_rn(__fadd_rn(p[0], p[1]), __fadd_rn(p[2], p[3])),
                                           __fadd_rn(__fadd_rn(p[4], p[5]), __fadd_rn(p[6], p[7])));
    *reinterpret_cast<uint4*>(pt + b * 16 * kBlockKeys * 2 + swz(r, grp, 8)) = make_uint4(
        pack_bf16(p[0], p[1]), pack_bf16(p[2], p[3]), pack_bf16(p[4], p[5]), pack_bf16(p[6], p[7]));
  }
  float o[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
  for (int b = 0; b < nb; ++b) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // value block b landed (and, at b = 0, every P tile is written)
    if (b + kStages - 1 < nb) issue(b + kStages - 1);  // into the stage of b - 1: free
    cp_async_commit();
    const float rescale[2] = {rs[g * nb + b], rs[(g + 8) * nb + b]};
    attn::block_pv<2, kVChunks>(o, rescale, smem_addr(pt + b * 16 * kBlockKeys * 2),
                                smem_addr(vr + (b % kStages) * kStageV), 0, 2 * warp, true);
  }
  cp_async_wait<0>();
  float l_run[2] = {0.0f, 0.0f}, m_run[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    for (int b = 0; b < nb; ++b) {
      const float4 x0 = reinterpret_cast<const float4*>(gs + (row * nb + b) * 8)[0];
      const float4 x1 = reinterpret_cast<const float4*>(gs + (row * nb + b) * 8)[1];
      const float bsum = __fadd_rn(__fadd_rn(__fadd_rn(x0.x, x0.y), __fadd_rn(x0.z, x0.w)),
                                   __fadd_rn(__fadd_rn(x1.x, x1.y), __fadd_rn(x1.z, x1.w)));
      l_run[r] = __fadd_rn(__fmul_rn(l_run[r], rs[row * nb + b]), bsum);
    }
    m_run[r] = mb[row * nb + nb - 1];
  }
  float inv[2];
  attn::final_denominators(inv, l_run, m_run, a.sink, head0 + g, head0 + g + 8);
  uint16_t* out0 = a.out + (static_cast<int64_t>(t) * kAttnHeads + head0 + g) * kKvDim + d0;
  uint16_t* out1 = out0 + 8 * kKvDim;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int col = 16 * warp + 8 * n + 2 * tq;
    *reinterpret_cast<uint32_t*>(out0 + col) = attn::final_pair(o[n][0], o[n][1], inv[0]);
    *reinterpret_cast<uint32_t*>(out1 + col) = attn::final_pair(o[n][2], o[n][3], inv[1]);
  }
}

cudaError_t launch_combine_pre(const SparseAttentionFp8Args& a,
                               const float* sg,
                               const uint16_t* kg,
                               int nkp,
                               cudaStream_t stream) {
  const int nb = nkp / kBlockKeys;
  const int bytes = 16 * (nkp + 4) * 4 + nb * 16 * kBlockKeys * 2 + kStages * kStageV +
                    16 * nb * 4 * 2 + 16 * nb * 8 * 4;
  cudaError_t e = cudaFuncSetAttribute(split_combine_pre_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_queries), kAttnHeads / 16, kKvDim / kDs);
  // Its blocks start while the scores kernel's last blocks run and wait before reading the
  // workspace.
  return pdl::launch_dependent(split_combine_pre_kernel, grid, dim3(kThreads), bytes, stream, a, sg,
                               kg, nkp);
}

template <int H>
cudaError_t launch_combine(const SparseAttentionFp8Args& a,
                           const float* sg,
                           const uint16_t* kg,
                           int nkp,
                           cudaStream_t stream) {
  constexpr int kBytes = CombineLayout<H>::kBytes;
  cudaError_t e = cudaFuncSetAttribute(split_combine_kernel<H>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_queries), kAttnHeads / H, kKvDim / kDs);
  return pdl::launch_dependent(split_combine_kernel<H>, grid, dim3(kThreads), kBytes, stream, a, sg,
                               kg, nkp);
}

}  // namespace

cudaError_t split_combine(const SparseAttentionFp8Args& a,
                          const float* sg,
                          const uint16_t* kg,
                          int nkp,
                          int sms,
                          cudaStream_t stream) {
  // The second kernel: 16 heads per block while that fills the SMs (two blocks each), else 64
  // (each value slice read once per query instead of four times).
  if (nkp <= kPreMaxKeys && a.num_queries * 16 <= sms) {  // one block per SM, one wave
    return launch_combine_pre(a, sg, kg, nkp, stream);
  }
  return a.num_queries * 16 <= 2 * sms ? launch_combine<16>(a, sg, kg, nkp, stream)
                                       : launch_combine<64>(a, sg, kg, nkp, stream);
}

}  // namespace di::backend::cuda
