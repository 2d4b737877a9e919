// PTX wrappers of the sm_90a FP8 GEMM (gemm_wgmma.cu): TMA tile loads, wgmma with
// operands in shared memory. Every wrapper is empty outside sm_90a device code (the kernel that
// calls them is too; its launcher refuses other devices), so the file compiles for every target.
#pragma once

#include <cstdint>

#include "backend/cuda/mbarrier.cuh"

namespace di::backend::cuda::wg {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DI_WGMMA_ENABLED 1
#else
#define DI_WGMMA_ENABLED 0
#endif

// The accumulator operand lists of the wrappers below ("+f"(d[0]) ... for 16, 32, 48 or 64
// floats): one spelling for every shape.
#define DI_WGMMA_D16                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15])
#define DI_WGMMA_D32                                                                             \
  DI_WGMMA_D16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),    \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define DI_WGMMA_D48                                                                             \
  DI_WGMMA_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),    \
      "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), \
      "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define DI_WGMMA_D64                                                                             \
  DI_WGMMA_D48, "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),    \
      "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), \
      "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#if DI_WGMMA_ENABLED

// 2-D TMA tile load into shared memory, completing on `bar` (coordinates: innermost first).
__device__ __forceinline__ void tma_load_2d(
    uint32_t dst, const void* tmap, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// 2-D TMA tile store from shared memory, committed as one bulk async-group of the issuing thread.
__device__ __forceinline__ void tma_store_2d(const void* tmap, uint32_t src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<uint64_t>(tmap)),
      "r"(c0), "r"(c1), "r"(src)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most N of the thread's bulk async-groups still read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until every bulk async-group of the thread is complete (its writes done).
__device__ __forceinline__ void tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Four 8x8 bf16 matrices from mma-fragment registers to shared memory (lane l gives the address
// of row l % 8 of matrix l / 8).
__device__ __forceinline__ void stmatrix_x4(
    uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// PTX named barrier `id` (1..15: 0 is __syncthreads') over `threads` threads, e.g. one
// warpgroup (128).
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later
// async-proxy reads (wgmma operands) once a barrier has been passed.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps the compiler from moving reads of an accumulator across a wgmma fence or wait: the
// tensor core writes these registers asynchronously, which the compiler cannot see.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle: rows of
// 128 bytes, 8-row groups 1024 bytes apart (the tile base must be 1024-byte aligned; a k32 step
// inside the row adds 32 bytes to the start address, the swizzle being a function of the address).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// D[64 x N] = A[64 x 32] . B[N x 32]^T in fp32 from e4m3, D's old value ignored (scale-d = 0).
// Accumulator layout per thread (warp w of the warpgroup, lane l): d[4j + 0/1] at row
// 16w + l/4, columns 8j + 2(l%4) + 0/1; d[4j + 2/3] at row + 8, the same columns.
// (The three wrappers below differ only in N; generated by a 10-line script.)
__device__ __forceinline__ void wgmma_m64n32k32(float (&d)[16], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : DI_WGMMA_D16
      : "l"(a), "l"(b), "r"(0));
}

__device__ __forceinline__ void wgmma_m64n64k32(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
      : DI_WGMMA_D32
      : "l"(a), "l"(b), "r"(0));
}

__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, %64, %65, p, 1, 1;\n}\n"
      : DI_WGMMA_D64
      : "l"(a), "l"(b), "r"(0));
}

// m64n96k32: the 96-column tile of gemm_fp8.cu (three block-sum sets fit the registers).
__device__ __forceinline__ void wgmma_m64n96k32(float (&d)[48], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47}, %48, %49, p, 1, 1;\n}\n"
      : DI_WGMMA_D48
      : "l"(a), "l"(b), "r"(0));
}

// D[64 x N] (+)= A[64 x 16] . B[N x 16]^T in fp32 from bf16, A in registers (per warp the
// mma.m16n8k16 A fragment of its 16 rows), B a K-major shared tile; scale_d = 0 ignores D's old
// value. D's layout as above. (Generated like the three above.)
__device__ __forceinline__ void wgmma_m64n8k16_bf16_rs(float (&d)[4],
                                                       const uint32_t (&a)[4],
                                                       uint64_t b,
                                                       int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, "
      "p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n32k16_bf16_rs(float (&d)[16],
                                                        const uint32_t (&a)[4],
                                                        uint64_t b,
                                                        int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : DI_WGMMA_D16
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n64k16_bf16_rs(float (&d)[32],
                                                        const uint32_t (&a)[4],
                                                        uint64_t b,
                                                        int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : DI_WGMMA_D32
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}

// The m64n128k16 register-A wgmma for 16-bit operand type TYPE ("bf16" or "f16"); TNSP: B's
// imm-trans-b ("0": K-major, "1": MN-major).
#define DI_WGMMA_M64N128K16_RS(TYPE, TNSP)                                                         \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                                 \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "    \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, " TNSP    \
      ";\n}\n"                                                                                     \
      : DI_WGMMA_D64                                                                               \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d))

__device__ __forceinline__ void wgmma_m64n128k16_bf16_rs(float (&d)[64],
                                                         const uint32_t (&a)[4],
                                                         uint64_t b,
                                                         int scale_d) {
  DI_WGMMA_M64N128K16_RS("bf16", "0");
}

// The bf16 one with B MN-major (N contiguous; desc with the leading byte offset between 64-wide
// N blocks): the PV step of sparse_attention_seesaw.cu.
__device__ __forceinline__ void wgmma_m64n128k16_bf16_rs_tn(float (&d)[64],
                                                            const uint32_t (&a)[4],
                                                            uint64_t b,
                                                            int scale_d) {
  DI_WGMMA_M64N128K16_RS("bf16", "1");
}

// D[64 x 128] (+)= A[64 x 16] . B[16 x 128] in fp32 from bf16 with A a K-major shared tile
// (desc_sw128) and B MN-major as above: the seesaw kernel's PV step of the other consumer's
// block, its P read where the owner published it.
__device__ __forceinline__ void wgmma_m64n128k16_bf16_ss_tn(float (&d)[64],
                                                            uint64_t a,
                                                            uint64_t b,
                                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : DI_WGMMA_D64
      : "l"(a), "l"(b), "r"(scale_d));
}

// The same with f16 operands (the routed experts' wgmma kernel, moe_wgmma_pipe.cuh).
__device__ __forceinline__ void wgmma_m64n128k16_f16_rs(float (&d)[64],
                                                        const uint32_t (&a)[4],
                                                        uint64_t b,
                                                        int scale_d) {
  DI_WGMMA_M64N128K16_RS("f16", "0");
}

// D[64 x 32] (+)= A[64 x 16] . B[32 x 16]^T in fp32 from bf16, both K-major shared tiles
// (desc_sw128); D's layout as above.
__device__ __forceinline__ void wgmma_m64n32k16_bf16_ss(float (&d)[16],
                                                        uint64_t a,
                                                        uint64_t b,
                                                        int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_D16
      : "l"(a), "l"(b), "r"(scale_d));
}

// D[64 x 64] (+)= A[64 x 16] . B[64 x 16]^T in fp32 from bf16, both K-major shared tiles
// (desc_sw128); D's layout as above (the S step of sparse_attention_seesaw.cu: 64 heads x 64 keys).
__device__ __forceinline__ void wgmma_m64n64k16_bf16_ss(float (&d)[32],
                                                        uint64_t a,
                                                        uint64_t b,
                                                        int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_D32
      : "l"(a), "l"(b), "r"(scale_d));
}

#endif  // DI_WGMMA_ENABLED

#if !DI_WGMMA_ENABLED
__device__ __forceinline__ void fence_proxy_async() {}  // callers' wgmma paths are compiled out
#endif

}  // namespace di::backend::cuda::wg
