// SPDX-License-Identifier: Apache-2.0
// Reading a structural tag's JSON fields (structural_tag.cc): each error names the field
// ("format.tags[1].begin: must be a string") and becomes the request's 400.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/json_schema/schema_converter.h"
#include "grammar/structural_tag/leaf_formats.h"
#include "grammar/vocabulary.h"

namespace di::grammar::tag_fields {

using OJson = nlohmann::ordered_json;

struct TagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw TagError(path + ": " + what);
}

inline const std::string& str(const OJson& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) fail(path + "." + key, "must be a string");
  return it->get_ref<const std::string&>();
}
inline bool flag(const OJson& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) fail(path + "." + key, "must be a boolean");
  return it->get<bool>();
}
inline bool flag_or(const OJson& obj, const char* key, const std::string& path, bool dflt) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? dflt : flag(obj, key, path);
}
inline const OJson& array(const OJson& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array() || it->empty())
    fail(path + "." + key, "must be a non-empty array");
  return *it;
}
// An array of non-empty strings (excludes, triggers); `required`: present and non-empty.
inline std::vector<std::string> strings(const OJson& obj,
                                        const char* key,
                                        const std::string& path,
                                        bool required = false) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (required) array(obj, key, path);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) fail(path + "." + key, "must be an array of non-empty strings");
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string() || (*it)[i].get<std::string>().empty())
      fail(path + "." + key + "[" + std::to_string(i) + "]", "must be a non-empty string");
    out.push_back((*it)[i].get<std::string>());
  }
  return out;
}

// A token given as {"type": "token", "token": T} or as T itself, inside obj[key] (or [i]).
inline int32_t token_id(const OJson& obj,
                        const char* key,
                        const std::string& path,
                        const TokenTrie* vocab) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(path + "." + key, "is missing");
  auto id = token_leaf_id(*it, vocab);
  if (!id) fail(path + "." + key, id.status().message());
  return *id;
}
inline int32_t token_id(const OJson& list,
                        size_t i,
                        const std::string& path,
                        const TokenTrie* vocab) {
  auto id = token_leaf_id(list[i], vocab);
  if (!id) fail(path + "[" + std::to_string(i) + "]", id.status().message());
  return *id;
}
// Token ids listed in f[key] (ids or texts); `required`: a non-empty list.
inline std::vector<int32_t> token_list(const OJson& f,
                                       const char* key,
                                       const std::string& path,
                                       bool required,
                                       const TokenTrie* vocab) {
  std::vector<int32_t> out;
  auto it = f.find(key);
  if (it == f.end() || it->is_null()) {
    if (required) fail(path + "." + key, "is missing");
    return out;
  }
  if (!it->is_array() || (required && it->empty()))
    fail(path + "." + key, "must be an array of tokens (ids or token texts)");
  for (size_t i = 0; i < it->size(); ++i) out.push_back(token_id(*it, i, path + "." + key, vocab));
  return out;
}

// json_schema's `style`: none for JSON, else one of the XML parameter styles.
inline std::optional<XmlStyle> xml_style(const std::string& style, const std::string& path) {
  if (style == "json") return std::nullopt;
  if (style == "qwen_xml") return XmlStyle::kQwen;
  if (style == "minimax_xml") return XmlStyle::kMiniMax;
  if (style == "deepseek_xml") return XmlStyle::kDeepSeek;
  if (style == "glm_xml") return XmlStyle::kGlm;
  if (style == "kimi_k3_xml") return XmlStyle::kKimiK3;
  if (style == "cohere_xml") return XmlStyle::kCohere;
  fail(path + ".style",
       "'" + style +
           "' is not supported (json, qwen_xml, minimax_xml, deepseek_xml, glm_xml, kimi_k3_xml, "
           "cohere_xml)");
}

// An optional bound (max_tokens, max_chars): -1 when absent or null, else an integer in
// [0, 2^31 - 1] as xgrammar allows.
inline int64_t bound(const OJson& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return -1;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 2147483647)
    fail(path + "." + key, "must be null or an integer in [0, 2147483647]");
  return it->get<int64_t>();
}

// token_triggered_tags: each tag begins with a trigger token (`begins`: -1 for a string
// begin), and each trigger begins some tag (else it would be a dead end).
inline void check_token_triggers(const std::vector<int32_t>& triggers,
                                 const std::vector<int32_t>& begins,
                                 const std::string& path) {
  std::vector<bool> used(triggers.size());
  for (size_t i = 0; i < begins.size(); ++i) {
    const std::string p = path + ".tags[" + std::to_string(i) + "].begin";
    if (begins[i] < 0) fail(p, "must be a token format in token_triggered_tags");
    auto at = std::find(triggers.begin(), triggers.end(), begins[i]);
    if (at == triggers.end()) fail(p, "must be one of the trigger_tokens");
    used[static_cast<size_t>(at - triggers.begin())] = true;
  }
  for (size_t t = 0; t < triggers.size(); ++t)
    if (!used[t]) fail(path + ".trigger_tokens[" + std::to_string(t) + "]", "begins no tag");
}

}  // namespace di::grammar::tag_fields
