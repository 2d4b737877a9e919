// SPDX-License-Identifier: Apache-2.0
#include "grammar/compiler.h"

#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/lark/lark_parser.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/structural_tag/structural_tag.h"

namespace di::grammar {

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenTrie> trie, CompilerOptions opts)
    : trie_(std::move(trie)),
      vocab_key_(std::to_string(trie_->fingerprint()) + ":"),
      opts_(std::move(opts)) {
  if (!opts_.mask_store) opts_.mask_store = std::make_shared<MaskStore>();
}

GrammarCompiler::Result GrammarCompiler::compile(const Grammar& g) {
  CompileLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + opts_.timeout;
  return CompiledGrammar::create(g, trie_, limits, opts_.mask_store);
}

GrammarCompiler::Result GrammarCompiler::cached(const std::string& kind_key,
                                                const std::function<Expected<Grammar>()>& fe) {
  const std::string key = vocab_key_ + kind_key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: two threads may race on one key; both results are equivalent.
  auto g = fe();
  if (!g) return g.status();
  auto cg = compile(*g);
  if (!cg) return cg.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key) == 0 && opts_.cache_capacity > 0) {
    lru_.emplace_front(key, *cg);
    index_[key] = lru_.begin();
    while (lru_.size() > opts_.cache_capacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return cg;
}

namespace {
std::string options_key(const JsonSchemaOptions& o) {
  return std::to_string(o.lenient) + "," + std::to_string(o.max_whitespace) + "," +
         std::to_string(o.any_order_max_properties) + ":";
}
}  // namespace

GrammarCompiler::Result GrammarCompiler::compile_json_schema(std::string_view schema,
                                                             const JsonSchemaOptions& opts) {
  std::string s(schema);
  return cached("json:" + options_key(opts) + s,
                [&] { return json_schema_to_grammar(std::string_view(s), opts); });
}

GrammarCompiler::Result GrammarCompiler::compile_json_object(const JsonSchemaOptions& opts) {
  return cached("object:" + options_key(opts),
                [&]() -> Expected<Grammar> { return any_json_grammar(opts); });
}

GrammarCompiler::Result GrammarCompiler::compile_regex(std::string_view pattern) {
  std::string p(pattern);
  return cached("regex:" + p, [&] { return regex_to_grammar(p); });
}

GrammarCompiler::Result GrammarCompiler::compile_ebnf(std::string_view text,
                                                      std::string_view root) {
  std::string t(text), r(root);
  // Token references resolve through the vocabulary, which cached() puts in every key.
  return cached("ebnf:" + r + ":" + t, [&] { return parse_ebnf(t, r, trie_.get()); });
}

GrammarCompiler::Result GrammarCompiler::compile_lark(std::string_view text,
                                                      std::string_view start) {
  std::string t(text), s(start);
  return cached("lark:" + s + ":" + t, [&] { return parse_lark(t, s); });
}

GrammarCompiler::Result GrammarCompiler::compile_structural_tag(std::string_view json_text,
                                                                const JsonSchemaOptions& opts) {
  std::string t(json_text);
  return cached("stag:" + options_key(opts) + t,
                [&] { return structural_tag_to_grammar(t, opts, trie_.get()); });
}

GrammarCompiler::Result GrammarCompiler::compile_keyed(
    const std::string& key, const std::function<Expected<Grammar>()>& build) {
  return cached("keyed:" + key, build);
}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace di::grammar
