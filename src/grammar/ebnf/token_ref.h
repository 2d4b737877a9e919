// SPDX-License-Identifier: Apache-2.0
// GBNF token references (llama.cpp's extras): `<[id]>` names a token by id, `<text>` (e.g.
// `<think>`) by its exact text through the vocabulary, `!<...>` any one text token but it. They
// need the vocabulary the grammar will run with, so the EBNF front end takes it as an argument.
#pragma once

#include <cstdint>
#include <string_view>

#include "grammar/vocabulary.h"
#include "util/status.h"

namespace di::grammar {

// `ref` is the reference with its angle brackets ("<[12]>", "<think>"). Errors name it: no
// vocabulary given, an id outside it, or text that is no token.
Expected<int32_t> resolve_token_ref(std::string_view ref, const TokenTrie* vocab);

}  // namespace di::grammar
