// ResponseParser: the streaming parser for DeepSeek V4.1 output text. A byte-level state machine
// (after deepseek-recipe's StreamProcessor; spec shared/spec/deepseek-v41-model.md §4 "Parse")
// that turns detokenized model output into reasoning_content / content / tool-call deltas.
//
//   - If the prompt ended with <think>, text up to </think> is reasoning (leading newlines
//     skipped); then content.
//   - A tool-call block starts at "<｜DSML｜" (newlines before it are dropped) and ends at
//     "</｜DSML｜ calls>" (V4's "tool_calls" spelling and tags without the space are accepted).
//     Each invoke becomes one tool call whose arguments are a JSON object: string="true"
//     parameters as JSON strings, string="false" ones as their raw JSON (a value that is not JSON
//     is passed as a string). A call is emitted when its </｜DSML｜ invoke> arrives.
//   - Markup that does not fit the format degrades to plain content (from the start of the
//     unfinished call, or of the block if no call completed) and sets malformed_tool_call; tool
//     markup is not parsed again after that. An unterminated block at finish() degrades likewise.
//   - A stray </think> in content is dropped. Stop strings apply to content only: the content
//     ends before the first one, and all later input is ignored.
//   - Bytes that might begin a marker, a stop string or an incomplete UTF-8 character are held
//     back until decided, so the accumulated result does not depend on how input is chunked, and
//     text deltas never split a UTF-8 character (for valid UTF-8 input).
// Never throws or aborts on any input.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace di::recipe {

struct ParserOptions {
  bool thinking = false;          // the prompt ended with <think>
  std::vector<std::string> stop;  // stop strings (empty ones are ignored)
  bool tool_calls = true;         // false: DSML markup is content (tool_choice "none")
};

struct ToolCallDelta {
  int index = 0;  // 0, 1, ... in output order
  std::string name;
  std::string arguments;  // one JSON object, e.g. {"city": "Paris", "days": 3}
};

// Exactly one of reasoning_content / content / tool_call is set (the others are empty), except a
// delta that only reports malformed_tool_call.
struct Delta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;  // at most one
  bool malformed_tool_call = false;
};

// The sum of a stream of deltas.
struct ParsedResponse {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool malformed_tool_call = false;
};
void accumulate(ParsedResponse& into, const std::vector<Delta>& deltas);

class ResponseParser {
 public:
  explicit ResponseParser(ParserOptions options);

  std::vector<Delta> push(std::string_view bytes);
  // End of output: held-back bytes are decided. Later push/finish calls return nothing.
  std::vector<Delta> finish();

  bool stopped() const { return stopped_; }  // a stop string matched
  const std::string& stop_string() const { return stop_string_; }
  bool malformed_tool_call() const { return malformed_; }
  int tool_call_count() const { return calls_; }

 private:
  enum class State {
    kReasoningStart,
    kReasoning,
    kContent,
    kPlain,
    kBlockOpen,
    kBetweenInvokes,
    kInvokeName,
    kInvokeNameEnd,
    kBetweenParams,
    kParamName,
    kParamType,
    kParamValue,
    kDone,
  };
  enum class Step { kAdvanced, kNeedMore };
  enum class Match { kNo, kPartial, kFull };

  std::vector<Delta> run();
  Step step_reasoning();
  Step step_content();
  Step step_block();
  Match match_at(size_t at, std::string_view lit) const;
  // Index of the first alternative matching fully at pos_; -1 if none; -2 if one is partial.
  int match_any(std::initializer_list<std::string_view> alts) const;
  size_t utf8_len_at(size_t at, bool* need_more) const;
  void emit_text(bool reasoning, std::string_view s);
  void consume(size_t n);  // advance pos_, keeping block bytes for a fallback
  void fail_block();
  bool in_block() const;

  ParserOptions opts_;
  State state_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  std::vector<Delta> out_;
  bool stopped_ = false;
  std::string stop_string_;
  bool malformed_ = false;
  int calls_ = 0;
  // Tool block: raw bytes since the fallback point, and the call being parsed.
  std::string block_raw_;
  std::string name_, key_, value_, args_;
  bool value_is_string_ = false;
};

}  // namespace di::recipe
