// SPDX-License-Identifier: Apache-2.0
// Passes over a built NfaGrammar (nfa.cc runs them after building every rule): dead-end pruning
// and nullable rules. Internal to the grammar library.
#pragma once

#include "grammar/nfa.h"

namespace di::grammar {

struct NfaPasses {
  // Drops every edge into a state from which no final state can be reached.
  static void prune_dead_ends(NfaGrammar& out);
  // A rule is nullable when its final state is reachable from its start through nullable calls.
  static void compute_nullable(NfaGrammar& out);
};

}  // namespace di::grammar
