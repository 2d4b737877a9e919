// ResponseParser: driver, reasoning and content stages (see response_parser.h). The tool-call
// block stages are in dsml_block.cc.
#include "recipe/parse/response_parser.h"

#include <utility>

namespace di::recipe {
namespace {

constexpr std::string_view kEndThink = "</think>";
constexpr std::string_view kDsmlStart = "<｜DSML｜";

}  // namespace

void accumulate(ParsedResponse& into, const std::vector<Delta>& deltas) {
  for (const auto& d : deltas) {
    into.reasoning_content += d.reasoning_content;
    into.content += d.content;
    into.tool_calls.insert(into.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    into.malformed_tool_call = into.malformed_tool_call || d.malformed_tool_call;
  }
}

ResponseParser::ResponseParser(ParserOptions options)
    : opts_(std::move(options)), state_(opts_.thinking ? State::kReasoningStart : State::kContent) {
  std::erase_if(opts_.stop, [](const std::string& s) { return s.empty(); });
}

std::vector<Delta> ResponseParser::push(std::string_view bytes) {
  if (eof_ || state_ == State::kDone) return {};
  buf_.append(bytes);
  return run();
}

std::vector<Delta> ResponseParser::finish() {
  if (eof_) return {};
  eof_ = true;
  return run();
}

bool ResponseParser::in_block() const {
  return state_ >= State::kBlockOpen && state_ <= State::kParamValue;
}

std::vector<Delta> ResponseParser::run() {
  while (state_ != State::kDone) {
    if (pos_ >= buf_.size() && !(eof_ && in_block())) break;
    Step s;
    if (state_ == State::kReasoningStart || state_ == State::kReasoning) {
      s = step_reasoning();
    } else if (state_ == State::kContent || state_ == State::kPlain) {
      s = step_content();
    } else {
      s = step_block();
    }
    if (s == Step::kNeedMore) break;
  }
  if (state_ == State::kDone) {
    buf_.clear();
  } else {
    buf_.erase(0, pos_);
  }
  pos_ = 0;
  return std::exchange(out_, {});
}

ResponseParser::Match ResponseParser::match_at(size_t at, std::string_view lit) const {
  const size_t avail = buf_.size() - at;
  if (avail >= lit.size()) {
    return std::string_view(buf_).substr(at, lit.size()) == lit ? Match::kFull : Match::kNo;
  }
  if (eof_) return Match::kNo;
  return std::string_view(buf_).substr(at) == lit.substr(0, avail) ? Match::kPartial : Match::kNo;
}

int ResponseParser::match_any(std::initializer_list<std::string_view> alts) const {
  int full = -1;
  int i = 0;
  for (const auto a : alts) {
    const Match m = match_at(pos_, a);
    if (m == Match::kPartial) return -2;
    if (m == Match::kFull && full < 0) full = i;
    ++i;
  }
  return full;
}

// Length of the UTF-8 character at `at` (1 for ASCII or an invalid byte). Sets *need_more when
// it is a lead byte whose continuation bytes have not all arrived yet.
size_t ResponseParser::utf8_len_at(size_t at, bool* need_more) const {
  *need_more = false;
  const auto c = static_cast<unsigned char>(buf_[at]);
  size_t len = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (c >= 0xF8) len = 1;
  size_t got = 1;
  while (got < len && at + got < buf_.size() &&
         (static_cast<unsigned char>(buf_[at + got]) & 0xC0) == 0x80) {
    ++got;
  }
  if (got < len && at + got == buf_.size() && !eof_) *need_more = true;
  return got;
}

void ResponseParser::emit_text(bool reasoning, std::string_view s) {
  if (s.empty()) return;
  if (!out_.empty() && out_.back().tool_calls.empty() && !out_.back().malformed_tool_call &&
      (reasoning ? !out_.back().reasoning_content.empty() : !out_.back().content.empty())) {
    (reasoning ? out_.back().reasoning_content : out_.back().content) += s;
    return;
  }
  Delta d;
  (reasoning ? d.reasoning_content : d.content) = std::string(s);
  out_.push_back(std::move(d));
}

void ResponseParser::consume(size_t n) {
  if (in_block()) block_raw_.append(buf_, pos_, n);
  pos_ += n;
}

ResponseParser::Step ResponseParser::step_reasoning() {
  if (state_ == State::kReasoningStart) {
    if (buf_[pos_] == '\n') {
      ++pos_;
      return Step::kAdvanced;
    }
    state_ = State::kReasoning;
  }
  const Match m = match_at(pos_, kEndThink);
  if (m == Match::kFull) {
    pos_ += kEndThink.size();
    state_ = State::kContent;
    return Step::kAdvanced;
  }
  if (m == Match::kPartial) return Step::kNeedMore;
  bool need_more = false;
  const size_t len = utf8_len_at(pos_, &need_more);
  if (need_more) return Step::kNeedMore;
  emit_text(true, std::string_view(buf_).substr(pos_, len));
  pos_ += len;
  return Step::kAdvanced;
}

ResponseParser::Step ResponseParser::step_content() {
  // Decide only when no candidate could still match with more input.
  bool partial = false;
  const std::string* stop = nullptr;
  for (const auto& s : opts_.stop) {
    const Match m = match_at(pos_, s);
    partial = partial || m == Match::kPartial;
    if (m == Match::kFull && stop == nullptr) stop = &s;
  }
  const Match think = match_at(pos_, kEndThink);
  partial = partial || think == Match::kPartial;
  Match dsml = Match::kNo;
  size_t dsml_at = pos_;
  if (state_ == State::kContent && opts_.tool_calls) {
    while (dsml_at < buf_.size() && buf_[dsml_at] == '\n') ++dsml_at;
    if (dsml_at == buf_.size() && dsml_at > pos_) {
      dsml = eof_ ? Match::kNo : Match::kPartial;
    } else {
      dsml = match_at(dsml_at, kDsmlStart);
    }
    partial = partial || dsml == Match::kPartial;
  }
  if (partial) return Step::kNeedMore;
  if (stop != nullptr) {
    stopped_ = true;
    stop_string_ = *stop;
    state_ = State::kDone;
    return Step::kAdvanced;
  }
  if (think == Match::kFull) {
    pos_ += kEndThink.size();
    return Step::kAdvanced;
  }
  if (dsml == Match::kFull) {
    state_ = State::kBlockOpen;
    block_raw_.clear();
    consume(dsml_at + kDsmlStart.size() - pos_);
    return Step::kAdvanced;
  }
  bool need_more = false;
  const size_t len = utf8_len_at(pos_, &need_more);
  if (need_more) return Step::kNeedMore;
  emit_text(false, std::string_view(buf_).substr(pos_, len));
  pos_ += len;
  return Step::kAdvanced;
}

}  // namespace di::recipe
