// SPDX-License-Identifier: Apache-2.0
// JSON-Schema-Test-Suite conformance for the grammar engine (part of `grammar-bench`): every
// instance is serialized, matched byte by byte, and compared with the suite's verdict.
#pragma once

#include <string>

#include "grammar/json_schema/schema_converter.h"

namespace di::cli {

struct ConformanceCounts {
  int groups = 0, compile_error = 0, tests = 0, passed = 0, skipped = 0;
  int validation_error = 0;    // a valid instance rejected
  int invalidation_error = 0;  // an invalid instance accepted
};

// `dir`: the suite's tests/draft2020-12 folder (top-level *.json files; optional/ is skipped).
// `opts`: the JSON Schema options (lenient, key order) every group compiles with.
ConformanceCounts run_schema_test_suite(const std::string& dir,
                                        const grammar::JsonSchemaOptions& opts,
                                        bool verbose);

// Python json.dumps() layout (", " and ": "), keeping key order; non-ASCII stays raw UTF-8.
std::string dump_python_style(const std::string& json_text);

}  // namespace di::cli
