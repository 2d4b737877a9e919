// SPDX-License-Identifier: Apache-2.0
// Per-sequence grammar state: accepts tokens, computes the next-token mask, fast-forwards forced
// bytes, and rolls back N tokens (speculative decoding). Not thread-safe; one per sequence. The
// CompiledGrammar it points to is shared and thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/token_mask.h"

namespace di::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by one token. Returns false (state unchanged) if the grammar does not allow it.
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, forced strings). All-or-nothing.
  bool accept_bytes(std::string_view bytes);
  // Fills `mask` (resized to the vocabulary) with the tokens allowed next. EOS is allowed iff the
  // input so far is a complete sentence.
  void fill_next_token_bitmask(TokenBitmask& mask);
  // Bytes every continuation must start with (may end mid-token; the caller retokenizes). Stops
  // where a token terminal could come next (it consumes a whole token, not bytes).
  std::string find_jump_forward_bytes();
  // The token that must come next when the only continuation is one token terminal `<[id]>`
  // (no bytes, no other terminal, the text not complete); nullopt otherwise.
  std::optional<int32_t> find_forced_token() const;
  // Undoes the last n accepted tokens (n <= num_accepted()).
  void rollback(size_t n);
  void reset();

  const CompiledGrammar& grammar() const { return *g_; }
  bool can_terminate() const { return !terminated_ && parser_.accepting(); }
  bool is_terminated() const { return terminated_; }
  size_t num_accepted() const { return history_.size(); }

 private:
  std::shared_ptr<const CompiledGrammar> g_;
  EarleyParser parser_;
  // Number of parser sets before each accepted token; kEosMark marks the EOS token.
  std::vector<size_t> history_;
  bool terminated_ = false;
  // Token terminals of the newest set: sets the bits they allow. Returns true when a negated
  // one made the mask (nearly) everything, so the byte walk was not needed.
  bool fill_token_terminals(TokenBitmask& mask);

  // Scratch for the mask: distinct scan states and the merged uncertain nodes.
  std::vector<uint32_t> scan_states_, uncertain_, merged_;
  std::vector<EarleyItem> step_;
  std::vector<int32_t> positive_;
};

}  // namespace di::grammar
