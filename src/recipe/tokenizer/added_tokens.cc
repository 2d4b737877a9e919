// Trie-based leftmost-longest matching of added tokens.
#include "recipe/tokenizer/added_tokens.h"

#include <algorithm>

#include "recipe/tokenizer/char_class.h"
#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

uint16_t class_before(std::string_view text, size_t pos) {
  if (pos == 0) return 0;
  size_t i = pos - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  int len = 0;
  return CharClassTable::instance().get(
      decode_utf8_valid(reinterpret_cast<const uint8_t*>(text.data()) + i, &len));
}

uint16_t class_at(std::string_view text, size_t pos, int* len) {
  return CharClassTable::instance().get(
      decode_utf8_valid(reinterpret_cast<const uint8_t*>(text.data()) + pos, len));
}

}  // namespace

void AddedTokenMatcher::Trie::insert(std::string_view s, int32_t token) {
  int32_t node = 0;
  for (const char ch : s) {
    const auto b = static_cast<uint8_t>(ch);
    auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
    if (it == kids.end() || it->first != b) {
      const auto child = static_cast<int32_t>(nodes.size());
      it = kids.insert(it, {b, child});
      nodes.push_back(Node{});
      node = child;
    } else {
      node = it->second;
    }
  }
  first_byte[static_cast<uint8_t>(s[0])] = true;
  // HF keeps the first token registered for a content string.
  if (nodes[node].token < 0) nodes[node].token = token;
}

int32_t AddedTokenMatcher::Trie::longest(std::string_view text, size_t p, size_t* len) const {
  int32_t node = 0;
  int32_t best = -1;
  for (size_t i = p; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    const auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
    if (it == kids.end() || it->first != b) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      *len = i + 1 - p;
    }
  }
  return best;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    Trie& trie = tokens_[i].normalized ? normalized_ : non_normalized_;
    trie.insert(tokens_[i].content, static_cast<int32_t>(i));
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::vector<Segment> first;
  split_pass(non_normalized_, text, 0, text.size(), first);
  for (const Segment& s : first) {
    if (s.id >= 0) {
      out.push_back(s);
    } else {
      split_pass(normalized_, text, s.begin, s.end, out);
    }
  }
}

void AddedTokenMatcher::split_pass(const Trie& trie,
                                   std::string_view text,
                                   size_t begin,
                                   size_t end,
                                   std::vector<Segment>& out) const {
  const std::string_view sub = text.substr(0, end);
  size_t start_offset = begin;
  size_t p = begin;
  while (p < end) {
    if (!trie.first_byte[static_cast<uint8_t>(sub[p])]) {
      ++p;
      continue;
    }
    size_t len = 0;
    const int32_t t = trie.longest(sub, p, &len);
    if (t < 0) {
      ++p;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(t)];
    size_t start = p;
    size_t stop = p + len;
    p = stop;  // matching resumes after this match even if it is rejected below
    if (tok.single_word) {
      const bool start_ok = start == begin || !(class_before(sub, start) & kClsWordChar);
      int clen = 0;
      const bool stop_ok = stop == end || !(class_at(sub, stop, &clen) & kClsWordChar);
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > begin && (class_before(sub, s) & kClsSpace)) {
        --s;
        while (s > begin && (static_cast<uint8_t>(sub[s]) & 0xC0) == 0x80) --s;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      int clen = 0;
      while (stop < end && (class_at(sub, stop, &clen) & kClsSpace)) {
        stop += static_cast<size_t>(clen);
      }
      p = stop;
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < end) out.push_back({start_offset, end, -1});
}

}  // namespace di::recipe
