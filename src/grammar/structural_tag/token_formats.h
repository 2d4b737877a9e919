// SPDX-License-Identifier: Apache-2.0
// xgrammar's token-level structural-tag formats that watch for trigger tokens (grammar9):
//   {"type": "token_dispatch", "rules": [[T, F], ...], "loop", "exclude_tokens"}
//     any text tokens but the triggers and the excluded ones; a trigger token T is followed by
//     its format F, then free tokens again (loop, the default) or the end (loop false: at most
//     one dispatch).
//   {"type": "token_triggered_tags", "trigger_tokens", "tags", "exclude_tokens",
//    "at_least_one", "stop_after_first"}
//     the same over tags whose begin is a token format naming one of the trigger tokens: free
//     tokens, a tag, free tokens again; stop_after_first ends after the first tag;
//     at_least_one may not end before one tag (free tokens may precede it, as our
//     triggered_tags).
// Free tokens are one token terminal excluding a set (ir.h Grammar::token_except), so a
// trigger token can only be read as a trigger, never as free text.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/ir.h"

namespace di::grammar {

// `bodies[i]`: what follows `triggers[i]` (distinct ids).
ExprId token_dispatch_expr(Grammar& g,
                           const std::vector<int32_t>& triggers,
                           const std::vector<ExprId>& bodies,
                           const std::vector<int32_t>& excluded,
                           bool loop);

// `tags`: each a whole tag whose first terminal is one of `triggers`.
ExprId token_triggered_expr(Grammar& g,
                            const std::vector<int32_t>& triggers,
                            const std::vector<ExprId>& tags,
                            const std::vector<int32_t>& excluded,
                            bool at_least_one,
                            bool stop_after_first);

}  // namespace di::grammar
