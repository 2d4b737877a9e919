// The grammar module's Vocabulary (raw token bytes, control tokens, EOS) from our byte-level BPE
// tokenizer, and the tokenizer grammar-bench walks instances with, so instances are segmented
// exactly as the model would see them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "api/grammar_constraint.h"
#include "grammar/vocabulary.h"
#include "recipe/tokenizer/tokenizer.h"
#include "util/status.h"

namespace di::cli {

class InstanceTokenizer {
 public:
  virtual ~InstanceTokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
};

using api::vocabulary_from_tokenizer;

// Instances as untrusted text: special-token spellings stay text.
class BpeInstanceTokenizer : public InstanceTokenizer {
 public:
  explicit BpeInstanceTokenizer(recipe::Tokenizer tok) : tok_(std::move(tok)) {}
  std::vector<int32_t> encode(std::string_view text) const override {
    return tok_.encode(text, recipe::SpecialTokens::kNone);
  }

 private:
  recipe::Tokenizer tok_;
};

}  // namespace di::cli
