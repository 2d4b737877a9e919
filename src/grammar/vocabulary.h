// SPDX-License-Identifier: Apache-2.0
// The grammar module's view of a tokenizer: token id -> bytes. It deliberately does not depend on
// the tokenizer module (see house-style §4.2); whoever owns a tokenizer builds this view.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/byte_set.h"

namespace di::grammar {

struct Vocabulary {
  // [vocab_size] raw bytes per id (NOT the GPT-2 printable form). Ids with empty bytes (padding
  // rows of the logit matrix) are never allowed.
  std::vector<std::string> token_bytes;
  // Control tokens: never matched as text; only eos_id is allowed, and only at the end.
  std::vector<int32_t> special_ids;
  int32_t eos_id = -1;
};

// Token trie in preorder: the mask walk visits a node's subtree as one contiguous range, so a
// rejected prefix skips all tokens below it with one jump (skip[node]).
class TokenTrie {
 public:
  static std::shared_ptr<const TokenTrie> build(const Vocabulary& vocab);

  size_t vocab_size() const { return token_bytes_.size(); }
  int32_t eos_id() const { return eos_id_; }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }
  bool is_special(int32_t id) const { return special_[id] != 0; }

  size_t num_nodes() const { return byte_.size(); }
  uint8_t byte(uint32_t node) const { return byte_[node]; }
  uint32_t depth(uint32_t node) const { return depth_[node]; }
  uint32_t skip(uint32_t node) const { return skip_[node]; }  // first node after the subtree
  // Ancestor of `node` at depth d (d <= depth(node)).
  uint32_t ancestor(uint32_t node, uint32_t d) const {
    while (depth_[node] > d) node = parent_[node];
    return node;
  }
  // Tokens ending exactly at `node`.
  const int32_t* tokens_begin(uint32_t node) const { return toks_.data() + tok_begin_[node]; }
  const int32_t* tokens_end(uint32_t node) const { return toks_.data() + tok_begin_[node + 1]; }
  // Tokens ending strictly below `node`: one contiguous run, because tokens are stored in
  // preorder of their nodes.
  const int32_t* subtree_tokens_begin(uint32_t node) const {
    return toks_.data() + tok_begin_[node + 1];
  }
  const int32_t* subtree_tokens_end(uint32_t node) const {
    return toks_.data() + tok_begin_[skip_[node]];
  }
  // Bytes on the edges strictly below `node` (lets the mask walk accept a whole subtree at once
  // when the parser loops on all of them).
  const ByteSet& subtree_bytes(uint32_t node) const { return sub_bytes_[node]; }
  // StringBodyDfa state after the node's bytes from kLoop (kDead: not a string-body prefix).
  int body_state(uint32_t node) const { return body_state_[node]; }
  // Whether every node strictly below `node` has a live body_state (all its tokens are
  // string-body prefixes).
  bool subtree_body_ok(uint32_t node) const { return sub_body_ok_[node] != 0; }
  // Characters started on the path to `node` (bytes outside 80-BF, saturating at 255), and the
  // most of any node in its subtree: a bounded string body accepts a body-prefix token iff its
  // characters fit the remaining budget (state_walk.cc).
  uint32_t chars(uint32_t node) const { return chars_[node]; }
  uint32_t subtree_max_chars(uint32_t node) const { return sub_max_chars_[node]; }
  // Bitmap [ceil(vocab/32)] of the tokens that are string-body prefixes of at most k characters
  // (k past the longest: all of them). A mask walk rooted in a string body takes these at once.
  const uint32_t* body_bits_upto(uint32_t k) const {
    const size_t words = (vocab_size() + 31) / 32;
    return body_bits_.data() + std::min<size_t>(k, body_levels_ - 1) * words;
  }
  // Preorder node of a text token, or -1 for special/empty tokens.
  int32_t node_of(int32_t id) const { return node_of_[id]; }

  // Bitmap [ceil(vocab/32)] of the text tokens (not special, not empty): what a negated token
  // terminal `!<x>` admits, less x.
  const std::vector<uint32_t>& text_bits() const { return text_bits_; }
  // FNV-1a over every token's bytes, special flag and the EOS id: names the vocabulary in the
  // compiled-grammar cache key (EBNF token references resolve through it).
  uint64_t fingerprint() const { return fingerprint_; }
  // Id of the token whose bytes are exactly `text` (a special one first), or -1. For EBNF
  // `<think>`-style token references; a linear scan (compile time only).
  int32_t find_token(std::string_view text) const;

  // Longest token (by bytes) that is a prefix of `s`, or -1. Used by the temporary greedy
  // tokenizer of the bench and tests.
  int32_t longest_prefix_token(std::string_view s, size_t* len) const;

 private:
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> special_;
  int32_t eos_id_ = -1;
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> depth_, skip_, tok_begin_, parent_;
  std::vector<int32_t> toks_, node_of_;
  std::vector<ByteSet> sub_bytes_;
  std::vector<int8_t> body_state_;
  std::vector<uint8_t> sub_body_ok_;
  std::vector<uint8_t> chars_, sub_max_chars_;
  std::vector<uint32_t> body_bits_;  // [body_levels_][words], cumulative over characters
  std::vector<uint32_t> text_bits_;
  uint64_t fingerprint_ = 0;
  size_t body_levels_ = 1;
};

}  // namespace di::grammar
