// Writes a random-weight V4.1 checkpoint in the official format (config.json, model.safetensors,
// tokenizer.json), for demos, tests and benchmarks (`deepinfer init-model`). Weights are drawn from
// a counter-based generator keyed by (seed, tensor name, element), so a checkpoint is the same on
// every machine and thread count, and every quantized tensor is stored exactly as the release
// stores it (FP8 32x32 ue8m0 blocks, packed FP4 experts with per-32 scales, BF16, F32).
#pragma once

#include <string>

#include "model/config.h"
#include "util/status.h"

namespace di::model {

struct InitOptions {
  std::string out_dir;
  uint64_t seed = 0;
  // A tokenizer.json to copy into the checkpoint; empty: write a synthetic WordLevel vocabulary of
  // vocab_size tokens (Engram derives its token map from whichever the checkpoint carries).
  std::string tokenizer_path;
};

// Fills the Engram fields that derive from the tokenizer and the prime layout, validates the
// config, and writes the checkpoint. Returns the final config.
Expected<ModelConfig> write_random_checkpoint(ModelConfig config, const InitOptions& options);

// The synthetic WordLevel tokenizer.json text init-model writes by default: BOS/EOS/PAD at 0/1/2,
// then words whose case variants normalize alike (so Engram's token map is not the identity).
std::string synthetic_tokenizer_json(int vocab_size);

}  // namespace di::model
