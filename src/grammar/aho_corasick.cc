// SPDX-License-Identifier: Apache-2.0
#include "grammar/aho_corasick.h"

namespace di::grammar {

AhoCorasick::AhoCorasick(const std::vector<std::string>& patterns) {
  constexpr uint32_t kNone = UINT32_MAX;
  std::array<uint32_t, 256> empty;
  empty.fill(kNone);
  next_.push_back(empty);
  match_.push_back(-1);
  depth_.push_back(0);
  // The trie; match_ first holds the pattern ending exactly at a node.
  for (size_t p = 0; p < patterns.size(); ++p) {
    uint32_t n = 0;
    for (char c : patterns[p]) {
      const auto b = static_cast<uint8_t>(c);
      if (next_[n][b] == kNone) {
        next_[n][b] = static_cast<uint32_t>(next_.size());
        next_.push_back(empty);
        match_.push_back(-1);
        depth_.push_back(depth_[n] + 1);
      }
      n = next_[n][b];
    }
    if (match_[n] < 0) match_[n] = static_cast<int32_t>(p);
  }
  // Breadth-first: failure links complete the transitions; a node without its own pattern
  // inherits its failure node's (the longest proper suffix that is a trie node, so its match is
  // the longest pattern suffix). BFS order guarantees the failure node is finished first.
  std::vector<uint32_t> fail(next_.size(), 0), queue;
  for (int b = 0; b < 256; ++b) {
    uint32_t& t = next_[0][b];
    if (t == kNone) {
      t = 0;
    } else {
      queue.push_back(t);
    }
  }
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const uint32_t n = queue[qi];
    if (match_[n] < 0) match_[n] = match_[fail[n]];
    for (int b = 0; b < 256; ++b) {
      uint32_t& t = next_[n][b];
      if (t == kNone) {
        t = next_[fail[n]][b];
      } else {
        fail[t] = next_[fail[n]][b];
        queue.push_back(t);
      }
    }
  }
}

}  // namespace di::grammar
