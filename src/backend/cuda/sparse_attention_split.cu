// Small-batch path of sparse_attention_fp8 (sparse_attention_split.h). With a few queries the
// one-block-per-query kernel runs only 4-32 blocks, each walking its query's key blocks in
// sequence (latency-bound: ~4 us per key block). Here the work that needs the whole key block
// in one place runs on one thread block per (key block, query, head group): decode the stored
// rows, S = Q K^T, scale and mask; the logits (fp32) and the decoded keys (bf16) go to a
// workspace. A second kernel (sparse_attention_combine.cu), one block per (query, heads, value
// slice), walks the key blocks' logits in order (online softmax, P, PV), reading keys from the
// workspace (L2-hot).
// Both kernels call the same step functions as the one-block kernel (sparse_attention_steps.cuh)
// in the same order per head, so every output bit is the same as there: no split of the softmax
// sums or of the PV chains, only of where they run (tested bitwise).
#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_combine.h"
#include "backend/cuda/sparse_attention_split.h"
#include "backend/cuda/sparse_attention_steps.cuh"

namespace di::backend::cuda {

namespace {

using attn::kBlockKeys;
using attn::kRawBytes;
using attn::kThreads;

constexpr int64_t kAlign = 256;
int64_t padded_keys(int64_t num_keys) {
  return (num_keys + kBlockKeys - 1) / kBlockKeys * kBlockKeys;
}
int64_t logits_bytes(int64_t num_queries, int64_t nkp) {
  return (num_queries * kAttnHeads * nkp * 4 + kAlign - 1) / kAlign * kAlign;
}

// Kernel 1: block (x, t, z) decodes key blocks [x per, x per + per) of query t (stored rows two
// blocks ahead, as the one-block kernel) and writes the scaled, masked logits of heads
// [z H, z H + H) to sg [T][64][nkp] and (z = 0) the decoded keys to kg [T][nkp][512].
template <int H>
__global__ void __launch_bounds__(kThreads, 1)
    split_scores_kernel(SparseAttentionFp8Args a, float* sg, uint16_t* kg, int nkp, int per) {
  pdl::wait_for_previous_grid();
  using S = attn::Split<H>;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* qs = smem;
  uint8_t* ks = qs + H * kKvDim * 2;
  uint8_t* raw = ks + kBlockKeys * kKvDim * 2;
  int32_t* idx = reinterpret_cast<int32_t*>(raw + 2 * kRawBytes);  // [per * 64]
  const int t = blockIdx.y, head0 = blockIdx.z * H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp % S::kRowGroups, wk = warp / S::kRowGroups;
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  pdl::release_next_grid();  // the softmax + PV kernel may start its blocks (they wait)
  const int jb = blockIdx.x * per * kBlockKeys;  // first key of this block's range
  const int n = min(per, nkp / kBlockKeys - static_cast<int>(blockIdx.x) * per);
  for (int k = threadIdx.x; k < n * kBlockKeys; k += kThreads) {
    const int j = jb + k;
    idx[k] = j >= num_keys ? -1
             : j < num_win ? a.indices[static_cast<int64_t>(t) * num_win + j]
                           : a.extra_indices[static_cast<int64_t>(t) * a.num_extra + j - num_win];
  }
  __syncthreads();
  const uint8_t* qg = reinterpret_cast<const uint8_t*>(
      a.q + (static_cast<int64_t>(t) * kAttnHeads + head0) * kKvDim);
  for (int u = threadIdx.x; u < H * 64; u += kThreads) {
    cp_async16(qs + swz(u / 64, u % 64, 64), qg + u * 16, 16);
  }
  attn::load_block(raw, idx, jb, num_win, num_keys, a);
  cp_async_commit();
  if (n > 1)
    attn::load_block(raw + kRawBytes, idx + kBlockKeys, jb + kBlockKeys, num_win, num_keys, a);
  cp_async_commit();
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), attn::kLog2e);
  const int key0 = wk * S::kKeysPerWarp;
  const int g = lane >> 2, tq = lane & 3;
  const uint32_t qs_a = smem_addr(qs), ks_a = smem_addr(ks);
  for (int i = 0; i < n; ++i) {
    const int j0 = jb + i * kBlockKeys;
    const int32_t* bidx = idx + i * kBlockKeys;
    cp_async_wait<1>();
    __syncthreads();  // stage i landed; every warp is done with the previous key tile
    attn::decode_block(ks, raw + (i & 1) * kRawBytes, bidx, j0, num_win, num_keys);
    __syncthreads();
    if (i + 2 < n) {
      attn::load_block(raw + (i & 1) * kRawBytes, bidx + 2 * kBlockKeys, j0 + 2 * kBlockKeys,
                       num_win, num_keys, a);
    }
    cp_async_commit();
    float s[S::kNtS][4];
    attn::block_scores<S::kNtS>(s, qs_a, ks_a, bidx, j0, num_keys, rg, key0, scale, true);
    float* r0 = sg + (static_cast<int64_t>(t) * kAttnHeads + head0 + rg * 16 + g) * nkp + j0;
    float* r1 = r0 + 8 * static_cast<int64_t>(nkp);
#pragma unroll
    for (int m = 0; m < S::kNtS; ++m) {
      const int key = key0 + 8 * m + 2 * tq;
      *reinterpret_cast<float2*>(r0 + key) = make_float2(s[m][0], s[m][1]);
      *reinterpret_cast<float2*>(r1 + key) = make_float2(s[m][2], s[m][3]);
    }
    if (blockIdx.z == 0) {
      uint16_t* kb = kg + (static_cast<int64_t>(t) * nkp + j0) * kKvDim;
      for (int u = threadIdx.x; u < kBlockKeys * 64; u += kThreads) {
        *reinterpret_cast<uint4*>(kb + u * 8) =
            *reinterpret_cast<const uint4*>(ks + swz(u / 64, u % 64, 64));
      }
    }
  }
  cp_async_wait<0>();
}

template <int H>
cudaError_t launch_scores(const SparseAttentionFp8Args& a,
                          float* sg,
                          uint16_t* kg,
                          int nkp,
                          int per,
                          cudaStream_t stream) {
  const int bytes = H * kKvDim * 2 + kBlockKeys * kKvDim * 2 + 2 * kRawBytes + per * kBlockKeys * 4;
  cudaError_t e = cudaFuncSetAttribute(split_scores_kernel<H>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  const int nb = nkp / kBlockKeys;
  const dim3 grid(static_cast<unsigned>((nb + per - 1) / per), static_cast<unsigned>(a.num_queries),
                  kAttnHeads / H);
  pdl::launch_dependent(split_scores_kernel<H>, dim3(grid), dim3(kThreads), bytes, stream, a, sg,
                        kg, nkp, per);
  return cudaGetLastError();
}

}  // namespace

size_t sparse_attention_fp8_workspace_bytes(int64_t num_queries, int64_t num_keys) {
  const int64_t nkp = padded_keys(num_keys);
  return static_cast<size_t>(logits_bytes(num_queries, nkp) + num_queries * nkp * kKvDim * 2);
}

cudaError_t sparse_attention_split(const SparseAttentionFp8Args& a, int sms, cudaStream_t stream) {
  const int64_t keys = static_cast<int64_t>(a.num_indices) + a.num_extra;
  const int nkp = static_cast<int>(padded_keys(keys));
  float* sg = static_cast<float*>(a.workspace);
  uint16_t* kg = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(a.workspace) +
                                             logits_bytes(a.num_queries, nkp));
  // The first kernel: one key block per thread block with 16 or 32 heads while that fits in one
  // wave; else 64 heads and `per` key blocks each (Q loaded once for them), `per` minimizing
  // waves * (per + 1) (+1: a block's fixed cost, about one key block's).
  const int64_t nb = nkp / kBlockKeys, blocks = a.num_queries * nb;
  cudaError_t e;
  if (blocks * 4 <= sms) {
    e = launch_scores<16>(a, sg, kg, nkp, 1, stream);
  } else if (blocks * 2 <= sms) {
    e = launch_scores<32>(a, sg, kg, nkp, 1, stream);
  } else {
    int64_t per = 1, best = -1;
    for (int64_t p = 1; p <= nb; ++p) {
      const int64_t waves = (a.num_queries * ((nb + p - 1) / p) + sms - 1) / sms;
      if (best < 0 || waves * (p + 1) < best) {
        best = waves * (p + 1);
        per = p;
      }
    }
    e = launch_scores<64>(a, sg, kg, nkp, static_cast<int>(per), stream);
  }
  if (e != cudaSuccess) return e;
  return split_combine(a, sg, kg, nkp, sms, stream);
}

}  // namespace di::backend::cuda
