// SPDX-License-Identifier: Apache-2.0
// The raw body of a JSON string as a byte DFA: any character but controls, '"' and '\\', in
// well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). Most expensive
// mask states sit inside such a body (free strings, keys that must differ from declared ones), so
// the mask walk checks whether a parser configuration behaves exactly like this DFA on every byte
// but '"' and '\\' (state_walk.cc) and then takes the tokens it accepts from a per-vocabulary
// table instead of walking them.
#pragma once

#include <cstdint>

namespace di::grammar {

struct StringBodyDfa {
  static constexpr int kLoop = 0;  // between characters
  static constexpr int kDead = -1;
  static constexpr int kNumStates = 8;
  static int step(int state, uint8_t b);
};

}  // namespace di::grammar
