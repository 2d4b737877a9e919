// Sparse sink attention over the FP8/FP4 KV cache on tensor cores (sparse_attention_fp8.h).
//
// One block per (query, group of H heads); the H heads are the MMA's M dimension, so each key is
// read and decoded once per block (MQA). Per block of 64 keys: cp.async brings the stored rows
// (two stages ahead of use), all threads decode them to bf16 in shared memory, then 8 warps run
// S = Q K^T (warp: 16 heads x 64/WK keys), exchange row maxima, write P = bf16(exp(S - max)) to
// shared memory, and accumulate O += P V with mma.sync m16n8k16 (warp: all H heads x 64 dims, so
// the value tile is read once per key block; pv_tiles = 1: the S step's 16 heads x 512/WK dims).
// The online softmax follows kernels::sparse_attention_query block for block (same 64-key blocks,
// same running max and rescaling, P rounded to bf16 before the value product); what differs is
// the order of the fp32 sums inside the MMAs and the exp approximation, hence a tolerance.
// Shared-memory tiles are [rows][512] bf16 with 16-byte chunks XOR-swizzled by row (conflict-free
// ldmatrix). The steps live in sparse_attention_steps.cuh, shared with the small-batch split
// path (sparse_attention_split.cu), which the launcher picks when given a workspace.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_split.h"
#include "backend/cuda/sparse_attention_steps.cuh"
#include "backend/cuda/sparse_attention_wgmma.h"

namespace di::backend::cuda {

namespace {

using attn::kBlockKeys;
using attn::kRawBytes;
using attn::kThreads;

template <int H>
struct Layout {
  static constexpr int kWk = attn::Split<H>::kWk;
  static constexpr int kDimsPerWarp = kKvDim / kWk;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + H * kKvDim * 2;
  static constexpr int kRaw = kK + kBlockKeys * kKvDim * 2;
  static constexpr int kP = kRaw + 2 * kRawBytes;
  static constexpr int kMax = kP + H * kBlockKeys * 2;
  static constexpr int kSum = kMax + kWk * H * 4;  // [H][8]: p sums per 8-key group
  static constexpr int kResc = kSum + H * 8 * 4;   // [H]: the block's rescale per head
  static constexpr int kInv = kResc + H * 4;       // [H]: the final denominators
  static constexpr int kIdx = kInv + H * 4;
  static size_t bytes(int num_keys_padded) {
    return kIdx + 4 * static_cast<size_t>(num_keys_padded);
  }
};

// kPvAll: the PV step's warp tile is all H heads x 512/8 dims (attn::block_pv_all_heads: the
// value tile read once per key block) instead of the S step's 16 heads x 512/kWk dims.
template <int H, bool kPvAll>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_fp8_kernel(SparseAttentionFp8Args a) {
  pdl::enter_dependent_grid();
  using L = Layout<H>;
  using S = attn::Split<H>;
  // O tiles per warp: kRowFrags row fragments of 16 heads x kNtO n-tiles of 8 dims.
  constexpr int kRowFrags = kPvAll ? H / 16 : 1;
  constexpr int kPvDims = kPvAll ? kKvDim / attn::kWarps : L::kDimsPerWarp;
  constexpr int kNtO = kPvDims / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* qs = smem + L::kQ;
  uint8_t* ks = smem + L::kK;
  uint8_t* raw = smem + L::kRaw;
  uint8_t* ps = smem + L::kP;
  float* red_max = reinterpret_cast<float*>(smem + L::kMax);
  float* red_sum = reinterpret_cast<float*>(smem + L::kSum);
  float* resc_s = reinterpret_cast<float*>(smem + L::kResc);
  float* inv_s = reinterpret_cast<float*>(smem + L::kInv);
  int32_t* idx = reinterpret_cast<int32_t*>(smem + L::kIdx);

  const int t = blockIdx.x, head0 = blockIdx.y * H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp % S::kRowGroups, wk = warp / S::kRowGroups;
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  const int num_blocks = (num_keys + kBlockKeys - 1) / kBlockKeys;

  // Q's copies first: they do not wait for the indices.
  const uint8_t* qg = reinterpret_cast<const uint8_t*>(
      a.q + (static_cast<int64_t>(t) * kAttnHeads + head0) * kKvDim);
  for (int u = threadIdx.x; u < H * 64; u += kThreads) {
    cp_async16(qs + swz(u / 64, u % 64, 64), qg + u * 16, 16);
  }
  attn::stage_indices(idx, a, t);
  __syncthreads();
  const bool do_load = !(a.ablate & 1), do_decode = !(a.ablate & 2), do_mma = !(a.ablate & 4);
  if (do_load) attn::load_block(raw, idx, 0, num_win, num_keys, a);
  cp_async_commit();
  if (do_load && num_blocks > 1) {
    attn::load_block(raw + kRawBytes, idx + kBlockKeys, kBlockKeys, num_win, num_keys, a);
  }
  cp_async_commit();

  // This lane's rows: g and g + 8 of the warp's row group.
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = rg * 16 + g, row1 = row0 + 8;
  float m_run[2] = {-1e30f, -1e30f};  // the CPU's finite floor
  float l_run[2] = {0.0f, 0.0f};
  float o[kRowFrags][kNtO][4];
#pragma unroll
  for (int f = 0; f < kRowFrags; ++f) {
#pragma unroll
    for (int n = 0; n < kNtO; ++n) o[f][n][0] = o[f][n][1] = o[f][n][2] = o[f][n][3] = 0.0f;
  }
  // This lane's PV rows: g and g + 8 of each row fragment (of the row group when !kPvAll).
  const int pv_row0 = kPvAll ? g : row0;
  const int pv_dim0 = kPvAll ? warp * kPvDims : wk * kPvDims;
  // Logits in the log2 domain: s2 = (q.k) * scale * log2(e), p = 2^(s2 - max2).
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), attn::kLog2e);
  const uint32_t qs_a = smem_addr(qs), ks_a = smem_addr(ks), ps_a = smem_addr(ps);
  const int key0 = wk * S::kKeysPerWarp;

  for (int b = 0; b < num_blocks; ++b) {
    const int j0 = b * kBlockKeys;
    cp_async_wait<1>();
    __syncthreads();  // stage b landed; every warp is done with the previous key tile
    if (do_decode) {
      attn::decode_block(ks, raw + (b & 1) * kRawBytes, idx + j0, j0, num_win, num_keys);
    }
    __syncthreads();
    if (do_load && b + 2 < num_blocks) {
      attn::load_block(raw + (b & 1) * kRawBytes, idx + j0 + 2 * kBlockKeys, j0 + 2 * kBlockKeys,
                       num_win, num_keys, a);
    }
    cp_async_commit();
    float s[S::kNtS][4];
    attn::block_scores<S::kNtS>(s, qs_a, ks_a, idx + j0, j0, num_keys, rg, key0, scale, do_mma);
    float rescale[2];
    attn::block_softmax<H, S::kNtS>(s, m_run, l_run, rescale, red_max, red_sum, ps, rg, wk, key0,
                                    kPvAll ? resc_s : nullptr);
    if constexpr (kPvAll) {
      float r[kRowFrags][2];
#pragma unroll
      for (int f = 0; f < kRowFrags; ++f) {
        r[f][0] = resc_s[f * 16 + g];
        r[f][1] = resc_s[f * 16 + g + 8];
      }
      attn::block_pv_all_heads<kRowFrags, kNtO>(o, r, ps_a, ks_a, pv_dim0 / 8, do_mma);
    } else {
      attn::block_pv<kNtO, 64>(o[0], rescale, ps_a, ks_a, rg, pv_dim0 / 8, do_mma);
    }
  }
  cp_async_wait<0>();

  float inv[2];
  attn::final_denominators(inv, l_run, m_run, a.sink, head0 + row0, head0 + row1);
  if (kPvAll && wk == 0 && tq == 0) {  // the PV tiles' rows are other heads: publish
    inv_s[row0] = inv[0];
    inv_s[row1] = inv[1];
  }
  __syncthreads();  // every warp is done reading the key tile, reused below for the output
  // out = bf16(acc * 2^32 / l), staged through the (swizzled) key tile for 16-byte stores.
#pragma unroll
  for (int f = 0; f < kRowFrags; ++f) {
    const int r0 = f * 16 + pv_row0, r1 = r0 + 8;
    const float inv0 = kPvAll ? inv_s[r0] : inv[0], inv1 = kPvAll ? inv_s[r1] : inv[1];
#pragma unroll
    for (int n = 0; n < kNtO; ++n) {
      const int col = pv_dim0 + 8 * n + 2 * tq;
      const uint32_t c0 = swz(r0, col / 8, 64) + (col % 8) * 2;
      const uint32_t c1 = swz(r1, col / 8, 64) + (col % 8) * 2;
      *reinterpret_cast<uint32_t*>(ks + c0) = attn::final_pair(o[f][n][0], o[f][n][1], inv0);
      *reinterpret_cast<uint32_t*>(ks + c1) = attn::final_pair(o[f][n][2], o[f][n][3], inv1);
    }
  }
  __syncthreads();
  uint8_t* og =
      reinterpret_cast<uint8_t*>(a.out + (static_cast<int64_t>(t) * kAttnHeads + head0) * kKvDim);
  for (int u = threadIdx.x; u < H * 64; u += kThreads) {
    *reinterpret_cast<uint4*>(og + u * 16) =
        *reinterpret_cast<const uint4*>(ks + swz(u / 64, u % 64, 64));
  }
}

template <int H, bool kPvAll>
cudaError_t launch(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const int padded = (a.num_indices + a.num_extra + kBlockKeys - 1) / kBlockKeys * kBlockKeys;
  const size_t bytes = Layout<H>::bytes(padded);
  cudaError_t e =
      cudaFuncSetAttribute(sparse_attention_fp8_kernel<H, kPvAll>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_queries), kAttnHeads / H);
  pdl::launch_dependent(sparse_attention_fp8_kernel<H, kPvAll>, dim3(grid), dim3(kThreads), bytes,
                        stream, a);
  return cudaGetLastError();
}

template <int H>
cudaError_t launch_pv(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  // PV tiles across all heads by default (docs/benchmarks.md); 1 keeps the row-group tiles.
  if (a.pv_tiles == 1) return launch<H, false>(a, stream);
  if (a.pv_tiles == 0 || a.pv_tiles == 2) return launch<H, true>(a, stream);
  return cudaErrorInvalidValue;
}

// Whether the seesaw kernel runs a validated call: forced (wgmma 3), or from
// kAttnSeesawMinQueries queries on sm_90 (same bits; measured on the H200, docs/benchmarks.md
// session 17: 0.93x at 64 queries, 0.67x at 256 and 0.61x at a 4K prefill against the mma.sync
// kernel's best heads per block). Calls that force another path (heads per block, the split
// path) or time stages keep the mma.sync kernels. (It reads q through a TMA tensor map and
// stores 16-byte pieces: 16-byte aligned bases.)
bool seesaw_picked(const SparseAttentionFp8Args& a, int major) {
  if (a.wgmma == 3) return true;
  const auto out = reinterpret_cast<uintptr_t>(a.out ? static_cast<void*>(a.out) : a.out_f32);
  const bool aligned = ((reinterpret_cast<uintptr_t>(a.q) | out) & 15) == 0;
  return a.wgmma == 0 && a.ablate == 0 && a.heads_per_block == 0 && a.split != 2 && aligned &&
         a.num_queries >= kAttnSeesawMinQueries && sparse_attention_wgmma_supported(major);
}

}  // namespace

bool sparse_attention_seesaw_runs(const SparseAttentionFp8Args& a) {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         seesaw_picked(a, major) && sparse_attention_wgmma_supported(major);
}

cudaError_t sparse_attention_fp8(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const int64_t keys = static_cast<int64_t>(a.num_indices) + a.num_extra;
  if (a.num_queries < 0 || a.num_queries > 0x7fffffff || a.num_indices < 0 || a.num_extra < 0 ||
      keys > kAttnMaxKeys || !a.q || !a.sink || (a.out == nullptr) == (a.out_f32 == nullptr) ||
      (a.num_indices > 0 && (!a.kv || !a.indices)) || (a.fresh_from < 0x7fffffff && !a.fresh_kv) ||
      (a.num_extra > 0 && (!a.extra_kv || !a.extra_indices)) ||
      (a.key_table == nullptr) != (a.key_rows == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (a.num_queries == 0) return cudaSuccess;
  int dev = 0, major = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  if (major < 8) return cudaErrorNotSupported;
  if (seesaw_picked(a, major)) {
    if (!sparse_attention_wgmma_supported(major)) return cudaErrorNotSupported;
    return sparse_attention_seesaw(a, sms, stream);
  }
  if (a.out_f32) return cudaErrorInvalidValue;  // only the seesaw kernel writes floats
  // The two-warpgroup wgmma kernel only when asked for: same bits, but slower than the 64-head
  // mma.sync kernel on the H200 (docs/benchmarks.md, "sparse attention on wgmma").
  if (a.wgmma == 2) {
    if (!sparse_attention_wgmma_supported(major)) return cudaErrorNotSupported;
    return sparse_attention_wgmma(a, stream);
  }
  if (keys > 0 && a.split != 1 && a.workspace && a.ablate == 0 &&
      a.workspace_bytes >= sparse_attention_fp8_workspace_bytes(a.num_queries, keys) &&
      (a.split == 2 || a.num_queries <= kAttnSplitMaxQueries)) {
    return sparse_attention_split(a, sms, stream);
  }
  // Fewest waves of blocks first, then the most heads per block (a key is decoded once per
  // block). Measured on the H200 (docs/benchmarks.md): T=8 best at 16, T=64 at 32, T=256 at 64.
  int h = a.heads_per_block;
  if (h == 0) {
    const int64_t t = a.num_queries;
    h = t * 4 <= sms ? 16 : t * 2 <= sms ? 32 : 64;
  }
  switch (h) {
    case 16:
      return launch_pv<16>(a, stream);
    case 32:
      return launch_pv<32>(a, stream);
    case 64:
      return launch_pv<64>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
