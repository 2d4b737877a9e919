#include "api/grammar_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "api/tool_call_grammar.h"
#include "grammar/lark/lark_parser.h"

namespace di::api {

Expected<grammar::Vocabulary> vocabulary_from_tokenizer(const recipe::Tokenizer& tok,
                                                        size_t vocab_size) {
  if (static_cast<size_t>(tok.vocab_size()) > vocab_size) {
    return invalid_argument("the tokenizer has " + std::to_string(tok.vocab_size()) +
                            " tokens, more than the vocabulary size " + std::to_string(vocab_size));
  }
  grammar::Vocabulary v;
  v.token_bytes.resize(vocab_size);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    v.token_bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
    if (tok.is_special(id)) v.special_ids.push_back(id);
  }
  // The thinking markers are control tokens whatever tokenizer.json says, never answer text.
  for (const char* marker : {"<think>", "</think>"})
    if (auto id = tok.token_to_id(marker)) v.special_ids.push_back(*id);
  v.eos_id = tok.token_to_id(
                    "<\xEF\xBD\x9C"
                    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")
                 .value_or(-1);
  return v;
}

Expected<std::unique_ptr<StructuredOutputCompiler>> StructuredOutputCompiler::create(
    const recipe::Tokenizer& tok, size_t vocab_size, grammar::CompilerOptions opts) {
  DI_ASSIGN_OR_RETURN(grammar::Vocabulary vocab, vocabulary_from_tokenizer(tok, vocab_size));
  std::unique_ptr<StructuredOutputCompiler> c(new StructuredOutputCompiler());
  c->trie_ = grammar::TokenTrie::build(vocab);
  c->compiler_ = std::make_unique<grammar::GrammarCompiler>(c->trie_, std::move(opts));
  if (auto id = tok.token_to_id("</think>")) c->think_end_id_ = *id;
  return c;
}

Status StructuredOutputCompiler::prepare(StructuredOutput& so) {
  using Kind = StructuredOutput::Kind;
  grammar::JsonSchemaOptions jopts;
  jopts.lenient = so.lenient;
  grammar::GrammarCompiler::Result r = invalid_argument("unknown structured output kind");
  switch (so.kind) {
    case Kind::kJsonSchema:
      r = compiler_->compile_json_schema(so.text, jopts);
      break;
    case Kind::kJsonObject:  // OpenAI's json_object: an object, not any JSON value
      r = compiler_->compile_json_schema(R"({"type":"object"})", jopts);
      break;
    case Kind::kRegex:
      r = compiler_->compile_regex(so.text);
      break;
    case Kind::kGrammar:  // vLLM's rule: a grammar without `::=` is Lark
      r = grammar::looks_like_lark(so.text) ? compiler_->compile_lark(so.text)
                                            : compiler_->compile_ebnf(so.text);
      break;
    case Kind::kStructuralTag:
      r = compiler_->compile_structural_tag(so.text, jopts);
      break;
    case Kind::kToolCalls: {
      const std::string key = "tools:" + std::to_string(so.lenient) + ":" + so.text;
      r = compiler_->compile_keyed(key, [&]() -> Expected<grammar::Grammar> {
        auto spec = nlohmann::ordered_json::parse(so.text, nullptr, false);
        return tool_call_grammar(spec, jopts);
      });
      break;
    }
    case Kind::kChoice: {
      grammar::Grammar g;
      std::vector<grammar::ExprId> alts;
      for (const std::string& c : so.choices) alts.push_back(g.literal(c));
      grammar::RuleId root = g.add_rule("root");
      g.set_body(root, g.alt(std::move(alts)));
      g.set_root(root);
      r = compiler_->compile(g);
      break;
    }
  }
  // Every failure here is about the request (unsupported keyword, bad syntax, too large to
  // compile in time): a 400 that says why.
  if (!r) {
    const std::string kind = structured_output_kind_name(so.kind);
    const std::string& msg = r.status().message();
    return invalid_argument(msg.starts_with(kind) ? msg : kind + ": " + msg);
  }
  so.compiled = std::move(r).value();
  return Status();
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                                     std::optional<int32_t> activate_after)
    : matcher_(std::move(g)), activate_after_(activate_after) {
  if (!activate_after_) {
    activated_at_ = 0;
    start_mask();  // overlaps the prefill
  }
}

GrammarConstraint::~GrammarConstraint() {
  if (pending_.valid()) pending_.wait();
}

void GrammarConstraint::start_mask() {
  mask_ready_ = false;
  pending_ = std::async(std::launch::async, [this] { matcher_.fill_next_token_bitmask(mask_); });
}

void GrammarConstraint::wait_mask() {
  if (pending_.valid()) {
    pending_.get();
    mask_ready_ = true;
  }
  if (!mask_ready_) {
    matcher_.fill_next_token_bitmask(mask_);
    mask_ready_ = true;
  }
}

void GrammarConstraint::apply(std::span<float> logits) {
  if (!active()) return;
  wait_mask();
  const float kOff = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), mask_.vocab_size());
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (mask_.test(static_cast<int32_t>(i)))
      any = any || logits[i] > kOff;
    else
      logits[i] = kOff;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = kOff;
  // Nothing left (the grammar has ended, or penalties set every allowed logit to -inf): end
  // the text rather than draw from an empty distribution.
  const int32_t eos = matcher_.grammar().trie().eos_id();
  if (!any && eos >= 0 && static_cast<size_t>(eos) < logits.size()) logits[eos] = 0.0f;
}

engine::TokenConstraint::Mask GrammarConstraint::allowed_bitmask(std::span<uint32_t> words) {
  if (!active()) return Mask::kNone;
  wait_mask();
  const size_t vocab = words.size() * 32;  // an upper bound; bits past the logits are unread
  const size_t n = std::min(vocab, mask_.vocab_size());
  std::fill(words.begin(), words.end(), 0u);
  const std::vector<uint32_t>& src = mask_.words();
  // Whole words, then clear the bits at and past n (apply() masks tokens >= the mask's size).
  const size_t full_words = n / 32;
  std::copy_n(src.begin(), std::min(full_words, src.size()), words.begin());
  for (size_t i = full_words * 32; i < n; ++i) {
    if (mask_.test(static_cast<int32_t>(i))) words[i / 32] |= 1u << (i % 32);
  }
  // apply() checks that some allowed logit is finite; the logits it sees (model output,
  // penalties, bias in [-100, 100]) always are, so "none allowed" is the empty mask.
  const bool any = std::any_of(words.begin(), words.end(), [](uint32_t w) { return w != 0; });
  const int32_t eos = matcher_.grammar().trie().eos_id();
  if (!any && eos >= 0 && static_cast<size_t>(eos) < vocab) words[eos / 32] |= 1u << (eos % 32);
  return Mask::kMask;
}

void GrammarConstraint::accept(int32_t token) {
  ++seen_;
  if (!active()) {
    if (activate_after_ && token == *activate_after_) {
      activated_at_ = seen_;
      start_mask();
    }
    return;
  }
  if (pending_.valid()) pending_.get();
  if (!matcher_.accept_token(token)) ok_ = false;
  start_mask();
}

void GrammarConstraint::rollback(size_t n) {
  if (pending_.valid()) pending_.get();
  n = std::min(n, seen_);
  if (active()) {
    const size_t grammar_tokens = seen_ - *activated_at_;
    matcher_.rollback(std::min(n, grammar_tokens));
    if (n > grammar_tokens && activate_after_) activated_at_.reset();
  }
  seen_ -= n;
  mask_ready_ = false;
}

Status read_structured_output(const nlohmann::json& body,
                              StructuredOutputCompiler& compiler,
                              std::optional<StructuredOutput>& out) {
  DI_ASSIGN_OR_RETURN(out, parse_structured_output(body));
  if (out) return compiler.prepare(*out);
  return Status();
}

}  // namespace di::api
