// The KV cache's stored row formats (spec §1.10), generic over head_dim (a multiple of 32): the
// window K=V rows in FP8 and the compressed KV rows in FP4, holding exactly the values of the
// reference's fake quantization (act_quant / fp4_act_quant with e4m3 block-16 scales), so that
// decoding a row gives those values bit for bit. At V4.1's 512 dims these are the 528- and 288-byte
// rows of backend/cuda/sparse_attention_fp8.h.
#pragma once

#include <cstdint>

namespace di::backend {

enum class KvFormat {
  kFp8,  // head_dim e4m3 codes, then head_dim/32 ue8m0 scale bytes
  kFp4,  // head_dim/2 bytes of e2m1 pairs (dim 2i in the low nibble of byte i), then head_dim/16
         // e4m3 scale bytes
};

// The bytes a row's codes and scales take.
constexpr int64_t kv_row_bytes(KvFormat format, int64_t head_dim) {
  return format == KvFormat::kFp8 ? head_dim + head_dim / 32 : head_dim / 2 + head_dim / 16;
}

// The distance between rows in a pool: the row rounded up to 4 bytes, so that a pool is an array
// of floats to backend::Memory (which moves floats) and every row starts on a float. Equal to
// kv_row_bytes at 512 dims (FP8) and at any multiple of 64 (FP4).
constexpr int64_t kv_row_stride(KvFormat format, int64_t head_dim) {
  return (kv_row_bytes(format, head_dim) + 3) / 4 * 4;
}

}  // namespace di::backend
