// SPDX-License-Identifier: Apache-2.0
// Per-sequence grammar state: accepts tokens, computes the next-token mask, fast-forwards forced
// bytes, and rolls back N tokens (speculative decoding). Not thread-safe; one per sequence. The
// CompiledGrammar it points to is shared and thread-safe.
#pragma once

#include <memory>
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
  // Bytes every continuation must start with (may end mid-token; the caller retokenizes).
  std::string find_jump_forward_bytes();
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
  // Scratch for the mask: distinct scan states and the merged uncertain nodes.
  std::vector<uint32_t> scan_states_, uncertain_, merged_;
};

}  // namespace di::grammar
