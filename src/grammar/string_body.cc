// SPDX-License-Identifier: Apache-2.0
#include "grammar/string_body.h"

namespace di::grammar {

// States: 0 between characters; 1 one continuation byte left; 2 after E0 (A0-BF next); 3 two
// continuation bytes left; 4 after ED (80-9F: no surrogates); 5 after F0 (90-BF); 6 three
// left; 7 after F4 (80-8F: up to U+10FFFF).
int StringBodyDfa::step(int state, uint8_t b) {
  auto in = [b](int lo, int hi) { return b >= lo && b <= hi; };
  switch (state) {
    case 0:
      if (in(0x20, 0x7F)) return b == '"' || b == '\\' ? kDead : 0;
      if (in(0xC2, 0xDF)) return 1;
      if (b == 0xE0) return 2;
      if (in(0xE1, 0xEC) || in(0xEE, 0xEF)) return 3;
      if (b == 0xED) return 4;
      if (b == 0xF0) return 5;
      if (in(0xF1, 0xF3)) return 6;
      if (b == 0xF4) return 7;
      return kDead;
    case 1:
      return in(0x80, 0xBF) ? 0 : kDead;
    case 2:
      return in(0xA0, 0xBF) ? 1 : kDead;
    case 3:
      return in(0x80, 0xBF) ? 1 : kDead;
    case 4:
      return in(0x80, 0x9F) ? 1 : kDead;
    case 5:
      return in(0x90, 0xBF) ? 3 : kDead;
    case 6:
      return in(0x80, 0xBF) ? 3 : kDead;
    case 7:
      return in(0x80, 0x8F) ? 3 : kDead;
    default:
      return kDead;
  }
}

}  // namespace di::grammar
