// SPDX-License-Identifier: Apache-2.0
// TEMPORARY (issue #7, until the recipe tokenizer lands on main): builds the grammar module's
// Vocabulary from a HuggingFace tokenizer.json (GPT-2 byte-level BPE strings mapped back to
// bytes), and tokenizes bench instances by greedy longest match over the vocabulary. Greedy is
// not the real BPE segmentation; the bench only needs *a* valid token sequence per instance.
// Swap GreedyTokenizer for di::recipe::Tokenizer behind InstanceTokenizer when it is available.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/vocabulary.h"
#include "util/status.h"

namespace di::cli {

class InstanceTokenizer {
 public:
  virtual ~InstanceTokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
};

// vocab_size: rows of the logit matrix (129,280 for DeepSeek); ids past the file's are padding.
Expected<grammar::Vocabulary> load_hf_vocabulary(const std::string& path, size_t vocab_size);

class GreedyTokenizer : public InstanceTokenizer {
 public:
  explicit GreedyTokenizer(std::shared_ptr<const grammar::TokenTrie> trie)
      : trie_(std::move(trie)) {}
  std::vector<int32_t> encode(std::string_view text) const override;

 private:
  std::shared_ptr<const grammar::TokenTrie> trie_;
};

}  // namespace di::cli
