// SPDX-License-Identifier: Apache-2.0
#include "cli/key_order.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace di::cli {

namespace {

using ojson = nlohmann::ordered_json;

void collect_ranks(const ojson& s, std::map<std::string, size_t>& rank) {
  if (s.is_array()) {
    for (const ojson& x : s) collect_ranks(x, rank);
    return;
  }
  if (!s.is_object()) return;
  if (s.contains("properties") && s["properties"].is_object())
    for (auto& [k, v] : s["properties"].items()) rank.emplace(k, rank.size());
  for (auto& [k, v] : s.items())
    if (k != "enum" && k != "const" && k != "examples" && k != "default") collect_ranks(v, rank);
}

ojson reorder(const ojson& v, const std::map<std::string, size_t>& rank) {
  if (v.is_array()) {
    ojson out = ojson::array();
    for (const ojson& x : v) out.push_back(reorder(x, rank));
    return out;
  }
  if (!v.is_object()) return v;
  std::vector<std::pair<std::string, const ojson*>> members;
  for (auto& [k, x] : v.items()) members.emplace_back(k, &x);
  auto rank_of = [&](const std::string& k) {
    auto it = rank.find(k);
    return it == rank.end() ? rank.size() : it->second;
  };
  std::stable_sort(members.begin(), members.end(), [&](const auto& a, const auto& b) {
    return rank_of(a.first) < rank_of(b.first);
  });
  ojson out = ojson::object();
  for (auto& [k, x] : members) out[k] = reorder(*x, rank);
  return out;
}

}  // namespace

ojson reorder_keys_like_schema(const ojson& schema, const ojson& instance) {
  std::map<std::string, size_t> rank;
  collect_ranks(schema, rank);
  return reorder(instance, rank);
}

}  // namespace di::cli
