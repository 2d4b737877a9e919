// SPDX-License-Identifier: Apache-2.0
// A JSON Schema compiled against the small test vocabulary, for the keyword tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/json_schema/schema_converter.h"
#include "test_vocab.h"

namespace di::grammar::testing {

class Schema {
 public:
  explicit Schema(const std::string& schema, JsonSchemaOptions o = {}) {
    auto g = json_schema_to_grammar(std::string_view(schema), o);
    status_ = g.error();
    if (!g) return;
    auto cg = CompiledGrammar::create(*g, TokenTrie::build(testing::small_vocab()));
    EXPECT_TRUE(cg.has_value());
    cg_ = *cg;
  }
  bool ok() const { return cg_ != nullptr; }
  bool accepts(const std::string& s) const { return testing::matches(cg_, s); }
  const Status& status() const { return status_; }

 private:
  Status status_;
  std::shared_ptr<const CompiledGrammar> cg_;
};

inline JsonSchemaOptions lenient() {
  JsonSchemaOptions o;
  o.lenient = true;
  return o;
}

}  // namespace di::grammar::testing
