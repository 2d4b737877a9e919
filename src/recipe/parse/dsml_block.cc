// ResponseParser: the DSML tool-call block stages (see response_parser.h).
//
//   <｜DSML｜ calls>
//   <｜DSML｜ invoke name="NAME">
//   <｜DSML｜ parameter name="KEY" string="true|false">VALUE</｜DSML｜ parameter>
//   </｜DSML｜ invoke>
//   </｜DSML｜ calls>
//
// Whitespace between tags is skipped; VALUE is raw text up to the closing parameter tag.
#include <nlohmann/json.hpp>

#include "recipe/chat/py_json.h"
#include "recipe/parse/response_parser.h"

namespace di::recipe {
namespace {

constexpr size_t kMaxNameBytes = 256;

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A string="false" value as JSON text: itself if it is one JSON value, else a JSON string.
std::string raw_json_value(std::string_view raw) {
  const std::string_view t = trim(raw);
  if (!t.empty() && nlohmann::json::accept(std::string(t))) return std::string(t);
  return py_json_quote(raw);
}

}  // namespace

void ResponseParser::fail_block() {
  // Everything since the fallback point is re-read as plain content.
  buf_ = block_raw_ + buf_.substr(pos_);
  pos_ = 0;
  block_raw_.clear();
  state_ = State::kPlain;
  malformed_ = true;
  Delta d;
  d.malformed_tool_call = true;
  out_.push_back(std::move(d));
}

ResponseParser::Step ResponseParser::step_block() {
  auto alt = [&](std::initializer_list<std::string_view> alts, int* which) -> Step {
    *which = match_any(alts);
    if (*which == -2) return Step::kNeedMore;
    if (*which >= 0) consume(alts.begin()[*which].size());
    return Step::kAdvanced;
  };
  auto skip_space = [&] {
    while (pos_ < buf_.size() && is_space(buf_[pos_])) consume(1);
    return pos_ < buf_.size() || eof_;
  };
  // Reads a name up to its closing quote (not consumed) into *out; false on a bad name.
  auto read_name = [&](std::string* out, bool* done) {
    *done = false;
    while (pos_ < buf_.size()) {
      const char c = buf_[pos_];
      if (c == '"') {
        *done = true;
        return !out->empty();
      }
      if (c == '\n' || c == '<' || c == '>' || out->size() >= kMaxNameBytes) return false;
      out->push_back(c);
      consume(1);
    }
    return !eof_;
  };

  int which = -1;
  switch (state_) {
    case State::kBlockOpen:
      if (alt({" calls>", "tool_calls>"}, &which) == Step::kNeedMore) return Step::kNeedMore;
      if (which < 0) break;
      state_ = State::kBetweenInvokes;
      return Step::kAdvanced;

    case State::kBetweenInvokes:
      if (!skip_space()) return Step::kNeedMore;
      if (alt({"<｜DSML｜ invoke name=\"", "<｜DSML｜invoke name=\"", "</｜DSML｜ calls>",
               "</｜DSML｜tool_calls>"},
              &which) == Step::kNeedMore) {
        return Step::kNeedMore;
      }
      if (which < 0) break;
      if (which >= 2) {  // block closed
        block_raw_.clear();
        state_ = State::kContent;
      } else {
        name_.clear();
        state_ = State::kInvokeName;
      }
      return Step::kAdvanced;

    case State::kInvokeName: {
      bool done = false;
      if (!read_name(&name_, &done)) break;
      if (!done) return Step::kNeedMore;
      state_ = State::kInvokeNameEnd;
      return Step::kAdvanced;
    }

    case State::kInvokeNameEnd:
      if (alt({"\">"}, &which) == Step::kNeedMore) return Step::kNeedMore;
      if (which < 0) break;
      args_.clear();
      state_ = State::kBetweenParams;
      return Step::kAdvanced;

    case State::kBetweenParams:
      if (!skip_space()) return Step::kNeedMore;
      if (alt({"<｜DSML｜ parameter name=\"", "<｜DSML｜parameter name=\"", "</｜DSML｜ invoke>",
               "</｜DSML｜invoke>"},
              &which) == Step::kNeedMore) {
        return Step::kNeedMore;
      }
      if (which < 0) break;
      if (which >= 2) {  // call complete
        Delta d;
        d.tool_calls.push_back(ToolCallDelta{calls_++, name_, "{" + args_ + "}"});
        out_.push_back(std::move(d));
        block_raw_.clear();
        state_ = State::kBetweenInvokes;
      } else {
        key_.clear();
        state_ = State::kParamName;
      }
      return Step::kAdvanced;

    case State::kParamName: {
      bool done = false;
      if (!read_name(&key_, &done)) break;
      if (!done) return Step::kNeedMore;
      state_ = State::kParamType;
      return Step::kAdvanced;
    }

    case State::kParamType:
      if (alt({"\" string=\"true\">", "\" string=\"false\">"}, &which) == Step::kNeedMore) {
        return Step::kNeedMore;
      }
      if (which < 0) break;
      value_is_string_ = which == 0;
      value_.clear();
      state_ = State::kParamValue;
      return Step::kAdvanced;

    case State::kParamValue:
      while (pos_ < buf_.size()) {
        if (alt({"</｜DSML｜ parameter>", "</｜DSML｜parameter>"}, &which) == Step::kNeedMore) {
          return Step::kNeedMore;
        }
        if (which >= 0) {
          if (!args_.empty()) args_ += ", ";
          args_ += py_json_quote(key_);
          args_ += ": ";
          args_ += value_is_string_ ? py_json_quote(value_) : raw_json_value(value_);
          state_ = State::kBetweenParams;
          return Step::kAdvanced;
        }
        value_.push_back(buf_[pos_]);
        consume(1);
      }
      if (!eof_) return Step::kNeedMore;
      break;

    default:
      break;
  }
  fail_block();
  return Step::kAdvanced;
}

}  // namespace di::recipe
