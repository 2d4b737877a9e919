// SPDX-License-Identifier: Apache-2.0
// Aho-Corasick automaton over a set of byte strings, as a complete DFA (256 transitions per
// node). TagDispatch (ir.h) uses it to watch free text for triggers: node = the longest suffix of
// the text read so far that is a prefix of some trigger.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace di::grammar {

class AhoCorasick {
 public:
  // patterns: non-empty. Node 0 is the root (nothing matched yet).
  explicit AhoCorasick(const std::vector<std::string>& patterns);

  size_t num_nodes() const { return next_.size(); }
  uint32_t next(uint32_t node, uint8_t byte) const { return next_[node][byte]; }
  // The longest pattern that is a suffix of the node's string (-1: none). Reaching a node with
  // a match means that pattern was completed by the last byte read.
  int32_t match(uint32_t node) const { return match_[node]; }
  uint32_t depth(uint32_t node) const { return depth_[node]; }

 private:
  std::vector<std::array<uint32_t, 256>> next_;
  std::vector<int32_t> match_;
  std::vector<uint32_t> depth_;
};

}  // namespace di::grammar
