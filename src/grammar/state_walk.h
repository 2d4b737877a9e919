// SPDX-License-Identifier: Apache-2.0
// Computes one NFA state's token-mask cache entry (accepted / uncertain, see compiled_grammar.h)
// by walking the token trie with an Earley parser rooted at the state.
//
// The walk memoizes parser configurations. A configuration is the newest Earley set's live items
// (those with edges left) plus the "rule ended" flags, where an item's origin is named by the
// configuration of the set it points to (the root and the newest set by markers). Equal keys
// therefore behave identically on every continuation however the trie paths to them differ
// (by induction over the origins), so the walk builds a DFA over configurations lazily and runs
// the parser only on transitions it has not seen yet: most of the trie costs one table lookup
// per node. A configuration that maps every byte below a trie node back to itself (a string
// body, a digit run) accepts that whole subtree without visiting it.
#pragma once

#include <cstdint>
#include <memory>

#include "grammar/nfa.h"
#include "grammar/vocabulary.h"

namespace di::grammar {

struct StateMask;

std::unique_ptr<StateMask> compute_state_mask(const NfaGrammar& g,
                                              const TokenTrie& trie,
                                              uint32_t q);

}  // namespace di::grammar
