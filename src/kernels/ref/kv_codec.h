// Encoding and decoding of one KV-cache row in its stored format (backend/kv_format.h): the
// reference codecs the backends' KV writers and attention readers are tested against.
#pragma once

#include <cstdint>

#include "backend/kv_format.h"

namespace di::kernels {

// Writes the codes and scales of x [dim] (dim % 32 == 0) into row: the FP8 format as
// fake_quant_row_fp8(x, dim, 32) computes them, the FP4 format as fake_quant_row_fp4(x, dim,
// kE4m3Block16) does.
void encode_kv_row(const float* x, int64_t dim, backend::KvFormat format, uint8_t* row);

// out [dim] = the values row holds: bitwise what the fake quantization of the encoded x gave.
void decode_kv_row(const uint8_t* row, int64_t dim, backend::KvFormat format, float* out);

}  // namespace di::kernels
