#include "cuda/cublaslt_gemm.h"

#include <cublasLt.h>

#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "cuda/bench_util.h"

namespace di::bench {

namespace {

Status lt_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return internal_error(std::string(what) + ": cublas status " +
                        std::to_string(static_cast<int>(s)));
}
#define DI_LT(call) DI_RETURN_IF_ERROR(lt_status((call), #call))

// Owns every handle and buffer of one timing, released on every path.
struct LtRun {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  void *da = nullptr, *db = nullptr, *dd = nullptr, *ws = nullptr, *sa = nullptr, *sb = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  ~LtRun() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
    for (void* p : {da, db, dd, ws, sa, sb}) (void)cudaFree(p);
    if (e0) (void)cudaEventDestroy(e0);
    if (e1) (void)cudaEventDestroy(e1);
  }
};

Status fill_random(void* dev, size_t bytes, bool fp8) {
  std::vector<uint8_t> h(bytes);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint8_t r = static_cast<uint8_t>(x >> 24);
    if (fp8) {
      h[i] = static_cast<uint8_t>((r & 0x87) | (6 + (r >> 3 & 1)) << 3);  // e4m3 exponent 6..7
    } else {
      h[i] = (i & 1) ? static_cast<uint8_t>((r & 0x80) | 0x3f) : r;  // bf16 in +-[0.5, 1)
    }
  }
  DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(dev, h.data(), bytes, cudaMemcpyHostToDevice));
  return {};
}

// A device buffer of `count` fp32 ones (the block scales: their values do not change the time).
Status alloc_ones(void** dev, size_t count) {
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(dev, count * sizeof(float)));
  const std::vector<float> ones(count, 1.0f);
  DI_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(*dev, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return {};
}

}  // namespace

Expected<double> time_cublaslt_gemm(LtType type, int64_t m, int64_t n, int64_t k, int iters) {
  LtRun r;
  const bool block = type == LtType::kFP8Block128;
  const bool fp8 = type == LtType::kFP8 || block;
  const cudaDataType_t in_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const size_t in_bytes = fp8 ? 1 : 2;
  const size_t ws_bytes = size_t{64} << 20;
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.da, in_bytes * m * k));
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.db, in_bytes * k * n));
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.dd, 2 * m * n));
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.ws, ws_bytes));
  // Random values of magnitude 0.5..2 (zeros or constants run measurably faster on this chip).
  DI_RETURN_IF_ERROR(fill_random(r.da, in_bytes * m * k, fp8));
  DI_RETURN_IF_ERROR(fill_random(r.db, in_bytes * k * n, fp8));
  DI_LT(cublasLtCreate(&r.handle));
  DI_LT(cublasLtMatmulDescCreate(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (block) {
    // Scale tensors sized for the larger of the documented layouts (one fp32 per 128-block of
    // k for every row of A and column of B).
    const int64_t kb = (k + 127) / 128;
    DI_RETURN_IF_ERROR(alloc_ones(&r.sa, static_cast<size_t>(kb * m)));
    DI_RETURN_IF_ERROR(alloc_ones(&r.sb, static_cast<size_t>(kb * n)));
    const int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a,
                                         sizeof mode_a));
    DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b,
                                         sizeof mode_b));
    DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &r.sa,
                                         sizeof r.sa));
    DI_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &r.sb,
                                         sizeof r.sb));
  }
  DI_LT(cublasLtMatrixLayoutCreate(&r.a, in_t, k, m, k));
  DI_LT(cublasLtMatrixLayoutCreate(&r.b, in_t, k, n, k));
  DI_LT(cublasLtMatrixLayoutCreate(&r.d, CUDA_R_16BF, m, n, m));
  DI_LT(cublasLtMatmulPreferenceCreate(&r.pref));
  DI_LT(cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  DI_LT(
      cublasLtMatmulAlgoGetHeuristic(r.handle, r.op, r.a, r.b, r.d, r.d, r.pref, 1, &heur, &found));
  if (found == 0) return unimplemented("cuBLASLt: no algorithm for this shape");
  const float alpha = 1.0f, beta = 0.0f;
  auto launch = [&]() -> Status {
    DI_LT(cublasLtMatmul(r.handle, r.op, &alpha, r.da, r.a, r.db, r.b, &beta, r.dd, r.d, r.dd, r.d,
                         &heur.algo, r.ws, ws_bytes, nullptr));
    return {};
  };
  for (int i = 0; i < 3; ++i) DI_RETURN_IF_ERROR(launch());
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.e0));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.e0));
  for (int i = 0; i < iters; ++i) DI_RETURN_IF_ERROR(launch());
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(r.e1));
  float ms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, r.e0, r.e1));
  return static_cast<double>(ms) / iters;
}

Expected<double> measure_copy_bytes_per_s() {
  DeviceBuffers buf;
  const size_t n = size_t{1} << 30;
  DI_ASSIGN_OR_RETURN(uint8_t * a, buf.alloc<uint8_t>(n));
  DI_ASSIGN_OR_RETURN(uint8_t * b, buf.alloc<uint8_t>(n));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(a, 1, n));
  DI_ASSIGN_OR_RETURN(double copy_ms, mean_event_ms(10, [&](int) {
                        return cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
                      }));
  return 2.0 * static_cast<double>(n) / (copy_ms * 1e-3);
}

Expected<MeasuredPeaks> measure_copy_and_bf16_peaks() {
  DI_ASSIGN_OR_RETURN(double bytes_per_s, measure_copy_bytes_per_s());
  DI_ASSIGN_OR_RETURN(double bf16_ms, time_cublaslt_gemm(LtType::kBF16, 8192, 8192, 8192, 10));
  return MeasuredPeaks{bytes_per_s, 2.0 * 8192.0 * 8192.0 * 8192.0 / (bf16_ms * 1e-3)};
}

}  // namespace di::bench
