// A per-sequence constraint on the next token (structured outputs): the sampler asks it to mask
// the logits before the draw and tells it the drawn token after. The engine only sees this
// interface; the grammar engine's implementation lives in the api layer (api/grammar_constraint.h).
// One object per sequence, used from the engine's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace di::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of tokens not allowed next to -inf. Leaves at least one token finite.
  virtual void apply(std::span<float> logits) = 0;
  // Advances past the drawn token.
  virtual void accept(int32_t token) = 0;
  // Undoes the last n accepted tokens (speculative decoding).
  virtual void rollback(size_t n) = 0;

  // What apply() would do, as an allowed-token bitmask for a backend that masks the logits itself
  // (bit t % 32 of words[t / 32]; words holds (vocab + 31) / 32 entries): kMask when it was
  // written, kNone when apply() would change nothing, kUnsupported (the default) when the
  // constraint can only apply() (the sampler then needs the logits on the host).
  enum class Mask { kUnsupported, kNone, kMask };
  virtual Mask allowed_bitmask(std::span<uint32_t> /*words*/) { return Mask::kUnsupported; }
  // What allowed_bitmask() will return at this point, without waiting for the mask: the engine
  // reserves a row's mask before the forward and has it written after the forward is issued, so
  // that a mask computed on a CPU thread overlaps the forward.
  virtual Mask bitmask_kind() const { return Mask::kUnsupported; }
};

}  // namespace di::engine
