// PromptBuilder: assembles a prompt from control tokens (emitted as their ids) and plain text
// (tokenized with SpecialTokens::kNone, so "<｜User｜>" typed by a user stays characters).
// Adjacent text pieces are tokenized together, so the ids equal those of encoding the whole
// prompt text with added-token matching (as the Python reference does) whenever the text pieces
// themselves spell no added token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipe/chat/chat_types.h"
#include "recipe/tokenizer/tokenizer.h"
#include "util/status.h"

namespace di::recipe {

class PromptBuilder {
 public:
  explicit PromptBuilder(const Tokenizer& tokenizer) : tok_(tokenizer) {}

  // A control token by its spelling; records an error if the tokenizer lacks it.
  void control(std::string_view token);
  // Untrusted or template text: never becomes a control token.
  void text(std::string_view s);
  // Trusted template text in which the given marker spellings are control tokens (the reference
  // tokenizes its own templates with added-token matching on).
  void template_text(std::string_view s, const std::vector<std::string_view>& markers);

  // The prompt, or the first error (a missing control token).
  Expected<RenderedPrompt> finish();

 private:
  void flush();

  const Tokenizer& tok_;
  RenderedPrompt out_;
  std::string pending_;
  Status error_;
};

}  // namespace di::recipe
