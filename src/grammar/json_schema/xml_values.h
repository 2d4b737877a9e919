// SPDX-License-Identifier: Apache-2.0
// Internal to the XML json_schema styles (xml_parameters.cc, xml_cohere.cc): what a value may be
// written as between an XML style's tags, and the names an undeclared parameter may take.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema/converter.h"
#include "grammar/utf8.h"

namespace di::grammar {

// Annotations that do not validate (title, description, $defs, ...).
bool schema_note(const std::string& keyword);

// A constrained string as raw text, where no text it allows can hold '<' (so never a closing tag,
// which starts with one): one anchored pattern or a format whose regex NFA has no '<' edge, or a
// length range as that many characters other than '<'. nullopt: the value stays JSON.
std::optional<ExprId> raw_constrained_string(Grammar& g, const json& s);

// A string with only a maxLength (minLength 0 or absent) as raw text of at most that many code
// points closed by the first of `closes` (included): a TagDispatch bounded by max_chars, whose
// count states share masks (nfa.h MaskTwin) where a walk of [^<]{0,N} would visit the whole
// vocabulary at every count. Any character may appear, as in xgrammar; the close ends the value
// as the parsers read it. nullopt for other schemas.
std::optional<ExprId> bounded_raw_text(Grammar& g,
                                       const json& s,
                                       const std::vector<std::string>& closes);

// How a name is spelled, one unit per code point (`spell`), and what one unit outside a set of
// code points (`other`: `first` for a name's first unit) and any tail of units (`tail`) are.
struct NameSpelling {
  std::function<std::string(uint32_t)> spell;
  std::function<ExprId(const CharClass& excluded, bool first)> other;
  ExprId tail;
};

// The longest declared name the XML styles take (name_not_in recurses per code point).
inline constexpr size_t kMaxNameBytes = 1024;

// Every nonempty name of the spelling except `names` (code points each; names the spelling
// cannot write need not be left out by the caller): a trie over the names, where any other unit
// leaves it for the free tail.
ExprId name_not_in(Grammar& g,
                   std::vector<std::vector<uint32_t>> names,
                   const NameSpelling& spelling);

// The code points of `s`; nullopt if it is not valid UTF-8.
std::optional<std::vector<uint32_t>> code_points(const std::string& s);

}  // namespace di::grammar
