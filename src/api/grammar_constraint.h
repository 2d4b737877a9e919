// Structured outputs at generation time: compiling a request's StructuredOutput against the
// tokenizer's vocabulary (with the grammar engine's compile cache and timeout), and the
// per-sequence engine::TokenConstraint that masks logits with the compiled grammar.
//
// Masks are computed off the engine thread: right after a token is accepted, the next mask is
// started on a worker so it overlaps the next forward pass; apply() waits for it.
// Thinking mode: the grammar applies only after the `</think>` token; before it nothing is masked.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "api/structured_output.h"
#include "engine/token_constraint.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "recipe/tokenizer/tokenizer.h"

namespace di::api {

// The grammar module's view of our BPE tokenizer: raw token bytes per id, control tokens never
// free text, EOS. vocab_size: rows of the logit matrix (ids past the tokenizer's are empty).
Expected<grammar::Vocabulary> vocabulary_from_tokenizer(const recipe::Tokenizer& tok,
                                                        size_t vocab_size);

// Thread-safe (the server may compile on its request threads).
class StructuredOutputCompiler {
 public:
  static Expected<std::unique_ptr<StructuredOutputCompiler>> create(
      const recipe::Tokenizer& tok, size_t vocab_size, grammar::CompilerOptions opts = {});

  // Compiles `so` (cached) into so.compiled. Errors are kInvalidArgument naming the problem (an
  // unsupported JSON Schema keyword, a bad regex, ...) or kResourceExhausted (compile timeout).
  Status prepare(StructuredOutput& so);
  std::optional<int32_t> think_end_id() const { return think_end_id_; }
  const grammar::TokenTrie& trie() const { return *trie_; }

 private:
  StructuredOutputCompiler() = default;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
  std::optional<int32_t> think_end_id_;
};

class GrammarConstraint final : public engine::TokenConstraint {
 public:
  // activate_after: a token id (`</think>`) before which the grammar does not apply; nullopt:
  // applies from the first generated token.
  GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                    std::optional<int32_t> activate_after);
  ~GrammarConstraint() override;

  void apply(std::span<float> logits) override;
  void accept(int32_t token) override;
  void rollback(size_t n) override;
  // apply()'s mask; when the grammar allows nothing, only the end-of-text token (apply() gives it
  // logit 0 then: every other logit is -inf, so both draw it).
  Mask allowed_bitmask(std::span<uint32_t> words) override;
  Mask bitmask_kind() const override { return active() ? Mask::kMask : Mask::kNone; }

  bool active() const { return activated_at_.has_value(); }
  // False once a token outside the grammar was accepted (only possible if apply() was skipped).
  bool ok() const { return ok_; }

 private:
  void start_mask();
  void wait_mask();

  grammar::GrammarMatcher matcher_;
  grammar::TokenBitmask mask_;
  std::future<void> pending_;
  bool mask_ready_ = false;
  std::optional<int32_t> activate_after_;
  std::optional<size_t> activated_at_;  // tokens seen when the grammar started applying
  size_t seen_ = 0;
  bool ok_ = true;
};

// For the server: reads a request body's response_format / structured_outputs / guided_* /
// SGLang fields and compiles them into `out` (nullopt: none asked). Errors are 400s naming why.
Status read_structured_output(const nlohmann::json& body,
                              StructuredOutputCompiler& compiler,
                              std::optional<StructuredOutput>& out);

}  // namespace di::api
