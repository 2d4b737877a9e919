// Added tokens (tokenizer.json "added_tokens"): control and marker tokens matched in the raw text
// before pre-tokenization, as HF's AddedVocabulary does: first the non-normalized tokens over the
// whole text, then the normalized ones inside the remaining gaps (our normalizer is the identity,
// but the two passes still decide which token wins). Leftmost-longest matching, honouring the
// single_word, lstrip and rstrip flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace di::recipe {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A segment of the input: either plain text [begin, end) or an added token (id >= 0).
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;  // -1 for plain text
};

// Immutable after construction; safe to share between threads.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return tokens_.empty(); }

  // Splits valid UTF-8 `text` into plain-text segments and added tokens.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t token);
    // Longest token starting at p (index into tokens_ and its length), or -1.
    int32_t longest(std::string_view text, size_t p, size_t* len) const;
  };
  // One pass of HF's find_matches over text[begin, end) with one trie.
  void split_pass(const Trie& trie,
                  std::string_view text,
                  size_t begin,
                  size_t end,
                  std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie non_normalized_;
  Trie normalized_;
};

}  // namespace di::recipe
