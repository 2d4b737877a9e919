// The tensors a V4.1 checkpoint holds for a config, in the official names and storage formats
// (spec §1.9): what init-model writes and what `deepinfer info` counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace di::model {

enum class TensorKind {
  kFp8Matrix,    // F8_E4M3 [out, in] + .scale F8_E8M0 [ceil(out/32), ceil(in/32)]
  kFp4Matrix,    // I8 [out, in/2] packed e2m1 + .scale F8_E8M0 [out, in/32]
  kBf16Matrix,   // BF16 [out, in]
  kNormWeight,   // BF16 [n], around 1
  kF32Vector,    // F32 (hc params, sinks, router biases)
  kEngramTable,  // F8_E4M3 [rows, dim] + .scale F8_E8M0 [rows, dim/32]
};

struct TensorSpec {
  std::string name;  // without ".weight" for matrices and tables (their prefix)
  TensorKind kind;
  std::vector<int64_t> shape;  // logical shape ([out, in] for matrices)
};

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& config);

// Bytes the stored tensor(s) of a spec take (weight + scale).
int64_t stored_bytes(const TensorSpec& spec);
int64_t num_parameters(const TensorSpec& spec);

}  // namespace di::model
