// SPDX-License-Identifier: Apache-2.0
#include "cli/bench_vocab.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

namespace di::cli {

namespace {

// GPT-2's bytes_to_unicode(), inverted: printable bytes stand for themselves, the others were
// shifted to U+0100 and up in byte order.
std::unordered_map<uint32_t, uint8_t> unicode_to_byte() {
  std::unordered_map<uint32_t, uint8_t> m;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
    m[cp] = static_cast<uint8_t>(b);
  }
  return m;
}

bool decode_byte_level(const std::string& s,
                       const std::unordered_map<uint32_t, uint8_t>& map,
                       std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    auto it = map.find(cp);
    if (it == map.end()) return false;
    out += static_cast<char>(it->second);
    i += n;
  }
  return true;
}

}  // namespace

Expected<grammar::Vocabulary> load_hf_vocabulary(const std::string& path, size_t vocab_size) {
  std::ifstream f(path);
  if (!f) return not_found("cannot open tokenizer file '" + path + "'");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j["model"].contains("vocab"))
    return invalid_argument("'" + path + "' is not a tokenizer.json with model.vocab");
  grammar::Vocabulary v;
  v.token_bytes.resize(vocab_size);
  auto map = unicode_to_byte();
  for (auto& [tok, id_json] : j["model"]["vocab"].items()) {
    int64_t id = id_json.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= vocab_size) continue;
    std::string bytes;
    // Added tokens also appear in model.vocab in plain text; added_tokens below handles them.
    if (!decode_byte_level(tok, map, bytes)) continue;
    v.token_bytes[id] = std::move(bytes);
  }
  // Every added token is a control token for the grammar (never free text).
  for (auto& t : j.value("added_tokens", nlohmann::json::array())) {
    int64_t id = t.value("id", -1);
    if (id < 0 || static_cast<size_t>(id) >= vocab_size) continue;
    v.token_bytes[id] = t.value("content", "");
    v.special_ids.push_back(static_cast<int32_t>(id));
    if (t.value("content", "") ==
        "<\xEF\xBD\x9C"
        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")
      v.eos_id = static_cast<int32_t>(id);
  }
  return v;
}

std::vector<int32_t> GreedyTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    int32_t id = trie_->longest_prefix_token(text.substr(pos), &len);
    if (id < 0) return {};  // a byte no token covers: cannot happen with a byte-level vocab
    out.push_back(id);
    pos += len;
  }
  return out;
}

}  // namespace di::cli
