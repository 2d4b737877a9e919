// SPDX-License-Identifier: Apache-2.0
// Entry point for callers: compiles JSON Schema / regex / EBNF / any-JSON against one vocabulary,
// with a compile timeout and an LRU cache of compiled grammars keyed by (vocabulary, kind, options,
// text). Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema/schema_converter.h"
#include "grammar/vocabulary.h"

namespace di::grammar {

struct CompilerOptions {
  size_t cache_capacity = 256;
  std::chrono::milliseconds timeout{10'000};
  // Mask-cache entries shared across grammars; must belong to the same vocabulary. Null: the
  // compiler makes its own.
  std::shared_ptr<MaskStore> mask_store;
};

class GrammarCompiler {
 public:
  GrammarCompiler(std::shared_ptr<const TokenTrie> trie, CompilerOptions opts = {});

  using Result = Expected<std::shared_ptr<const CompiledGrammar>>;
  Result compile_json_schema(std::string_view schema, const JsonSchemaOptions& opts = {});
  Result compile_json_object(const JsonSchemaOptions& opts = {});
  Result compile_regex(std::string_view pattern);
  Result compile_ebnf(std::string_view text, std::string_view root = "root");
  // Lark-lite (lark/lark_parser.h).
  Result compile_lark(std::string_view text, std::string_view start = "start");
  // xgrammar's structural_tag JSON (structural_tag/structural_tag.h).
  Result compile_structural_tag(std::string_view json_text, const JsonSchemaOptions& opts = {});
  // A grammar built by the caller, cached under `key` (which must determine the grammar).
  Result compile_keyed(const std::string& key, const std::function<Expected<Grammar>()>& build);
  // Compiles an already built IR (no caching).
  Result compile(const Grammar& g);

  size_t cache_size() const;

 private:
  Result cached(const std::string& key, const std::function<Expected<Grammar>()>& front_end);

  std::shared_ptr<const TokenTrie> trie_;
  std::string vocab_key_;  // the vocabulary's fingerprint, in every cache key
  CompilerOptions opts_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace di::grammar
