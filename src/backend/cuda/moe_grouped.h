// The routed experts of one MoE layer on the device (model/moe.cc's expert loop and combine),
// driven by the router's device-side result: no host synchronisation, fixed launch shapes (from
// tokens, topk and the expert count only), so a CUDA graph can capture it.
//
// Launches: the routing plan (one CTA: per-expert counts and offsets, a slot per (token, k),
// work units of up to rows_per_pass rows of one expert; order within an expert is arbitrary,
// rows are independent) with act_quant of x in its other CTAs; the grouped w1/w3 GEMM + SwiGLU
// (clamp, routing weight) over every unit, with act_quant of h when a CTA owns whole 32-blocks
// (32 columns; else one more launch); the grouped w2 GEMM; the combine. The GEMMs are persistent
// grids over (unit, column tile) items that read the unit count from device memory; the last
// three launches are programmatic (each starts while the previous one drains).
//
// Numerics: per (token, expert) the CPU's linear -> swiglu -> linear sequence bit for bit, except
// swiglu's exp (correctly rounded here, glibc's expf on the CPU: see device_numeric.cuh). The
// combine adds each token's expert outputs in ascending expert index into an fp32 sum from 0,
// then the shared expert's output, then rounds to bf16, as Model::moe does. With tensor_cores
// (the `tensor` GEMM path) the expert GEMMs are moe_grouped_tc.cu's f16 MMA block sums instead
// of the 8-lane fp32 ones: within tolerance of the CPU (equal on every random test so far).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace di::backend::cuda {

// One FP4 matrix [out, in] per expert (e2m1 pairs + ue8m0 scales per 32), through device arrays
// of device pointers, so experts may live anywhere in the arena.
struct ExpertMatrices {
  const uint8_t* const* data = nullptr;
  const uint8_t* const* scale = nullptr;
};

struct MoeRoutedArgs {
  const float* x = nullptr;  // [tokens, dim] the FFN input (before act_quant)
  int64_t tokens = 0, dim = 0, inter = 0;
  const int32_t* experts = nullptr;  // [tokens, topk] moe_route's output
  const float* weights = nullptr;    // [tokens, topk]
  int topk = 0, num_experts = 0;
  ExpertMatrices w1, w3, w2;      // w1, w3: [inter, dim]; w2: [dim, inter]
  float swiglu_limit = 0.0f;      // <= 0: no clamp
  const float* shared = nullptr;  // [tokens, dim] shared expert output (bf16 values), or null
  float* out = nullptr;           // [tokens, dim] bf16 values
  // When set, `shared` is produced on another stream and complete when this event is: the
  // combine (the only reader of `shared`) waits for it, so the experts run beside that stream.
  cudaEvent_t shared_ready = nullptr;
  int tile_variant = -1;  // 0..kMoeVariants-1 (below); -1: moe_routed_pick
  // The `tensor` GEMM path's experts (moe_grouped_tc.cu): f16 tensor-core block sums, within
  // tolerance of the CPU instead of bitwise; tile_variant then picks 8, 16 or 32 rows per unit
  // with 4 warps of 32 features (0-2) or 8 warps of 16 (3-5), or the wgmma kernels over
  // 128-row units (6; 7: without the folded weight scales; 8: two block-sum sets per consumer;
  // sm_90 only, else variant 2), or 3 with the deep cp.async ring forced (9; 0 and 3 take it
  // by themselves when their grid fits in one wave), all bitwise equal; -1: moe_routed_tc_pick.
  bool tensor_cores = false;
};

// Tile variants, all bitwise equal: 8, 16, 32 columns per CTA at one CTA per SM (0-2), the same
// at two CTAs per SM (3-5), then 16 and 32 columns at two CTAs per SM with twice the work per
// pipeline chunk (6-7).
inline constexpr int kMoeVariants = 8;
int moe_routed_pick(int64_t tokens, int topk, int num_experts);

// Tensor-core variants (moe_grouped_tc.cu), all bitwise equal: 0-5 the tile kernels (8/16/32 rows
// per unit, 4 or 8 warps), 6-8 wgmma, 9 = 3 with the deep ring, 10 = 3 with the decode product
// (moe_tc_decode.cuh; the pick at single-group units), 11 = 10 with the up product's K split
// over two warp groups (slower: kept for its tests and profiles), 12 = 6 with two converted
// weight stages in its ring instead of four.
inline constexpr int kMoeTcVariants = 13;
int moe_routed_tc_pick(int64_t tokens, int topk, int num_experts);

// Whether the shapes are supported (dim and inter multiples of 128, topk <= 16, experts <= 1024).
bool moe_routed_supports(const MoeRoutedArgs& a);
// Device scratch that moe_routed needs on either path (256-byte aligned pieces).
size_t moe_routed_scratch_bytes(
    int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter);
cudaError_t moe_routed(const MoeRoutedArgs& a, void* scratch, cudaStream_t s);

// The tensor-core path's share of the above (moe_routed dispatches to it).
size_t moe_routed_tc_scratch_bytes(
    int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter);
cudaError_t moe_routed_tc(const MoeRoutedArgs& a, void* scratch, cudaStream_t s);

}  // namespace di::backend::cuda
