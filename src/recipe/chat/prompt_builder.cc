// PromptBuilder (see prompt_builder.h).
#include "recipe/chat/prompt_builder.h"

namespace di::recipe {

void PromptBuilder::control(std::string_view token) {
  const auto id = tok_.token_to_id(token);
  if (!id) {
    if (error_.ok()) {
      error_ = not_found("tokenizer has no control token '" + std::string(token) +
                         "' (a DeepSeek V4.1 tokenizer.json is needed)");
    }
    return;
  }
  flush();
  out_.ids.push_back(*id);
  out_.text += token;
}

void PromptBuilder::text(std::string_view s) {
  pending_ += s;
  out_.text += s;
}

void PromptBuilder::template_text(std::string_view s,
                                  const std::vector<std::string_view>& markers) {
  size_t start = 0;
  size_t i = 0;
  while (i < s.size()) {
    std::string_view hit;
    for (const auto m : markers) {
      if (!m.empty() && s.substr(i, m.size()) == m) {
        hit = m;
        break;
      }
    }
    if (hit.empty()) {
      ++i;
      continue;
    }
    text(s.substr(start, i - start));
    control(hit);
    i += hit.size();
    start = i;
  }
  text(s.substr(start));
}

void PromptBuilder::flush() {
  if (pending_.empty()) return;
  const auto ids = tok_.encode(pending_, SpecialTokens::kNone);
  out_.ids.insert(out_.ids.end(), ids.begin(), ids.end());
  pending_.clear();
}

Expected<RenderedPrompt> PromptBuilder::finish() {
  if (!error_.ok()) return error_;
  flush();
  return std::move(out_);
}

}  // namespace di::recipe
