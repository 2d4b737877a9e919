// SPDX-License-Identifier: Apache-2.0
#include "cli/grammar_conformance.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema/schema_converter.h"
#include "grammar/matcher.h"

namespace di::cli {

namespace {

using ojson = nlohmann::ordered_json;

void dump(const ojson& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto& [k, x] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += ojson(k).dump();
      out += ": ";
      dump(x, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      dump(v[i], out);
    }
    out += ']';
  } else {
    out += v.dump();
  }
}

}  // namespace

std::string dump_python_style(const std::string& json_text) {
  std::string out;
  dump(ojson::parse(json_text), out);
  return out;
}

ConformanceCounts run_schema_test_suite(const std::string& dir,
                                        const grammar::JsonSchemaOptions& opts,
                                        bool verbose) {
  ConformanceCounts c;
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  // The byte-level matcher needs no vocabulary; a one-token stub keeps the API happy.
  grammar::Vocabulary v;
  v.token_bytes = {"x"};
  auto trie = grammar::TokenTrie::build(v);
  for (const fs::path& p : files) {
    std::ifstream f(p);
    ojson groups = ojson::parse(f, nullptr, false);
    if (!groups.is_array()) continue;
    for (const ojson& group : groups) {
      ++c.groups;
      const ojson& tests = group.contains("tests") ? group["tests"] : ojson::array();
      auto g = grammar::json_schema_to_grammar(group["schema"], opts);
      std::shared_ptr<const grammar::CompiledGrammar> cg;
      if (g) {
        auto r = grammar::CompiledGrammar::create(*g, trie);
        if (r) cg = *r;
      }
      if (!cg) {
        ++c.compile_error;
        c.skipped += static_cast<int>(tests.size());
        continue;
      }
      for (const ojson& t : tests) {
        ++c.tests;
        std::string text;
        dump(t["data"], text);
        grammar::GrammarMatcher m(cg);
        bool accepted = m.accept_bytes(text) && m.can_terminate();
        bool valid = t.value("valid", false);
        if (accepted == valid) {
          ++c.passed;
          continue;
        }
        (valid ? c.validation_error : c.invalidation_error)++;
        if (verbose)
          std::printf("suite %s / %s / %s: %s instance %s\n", p.filename().c_str(),
                      group.value("description", "").c_str(), t.value("description", "").c_str(),
                      valid ? "valid" : "invalid", valid ? "rejected" : "accepted");
      }
    }
  }
  return c;
}

}  // namespace di::cli
