// SPDX-License-Identifier: Apache-2.0
// `deepinfer grammar-bench`: MaskBench-style correctness and latency run of the grammar engine
// over a folder of {description, meta, schema, tests:[{data, valid}]} files, and a conformance
// run over the JSON-Schema-Test-Suite (--test-suite DIR). Last stdout line is one JSON object.
#pragma once

namespace di::cli {

int run_grammar_bench_command(int argc, char** argv);

}  // namespace di::cli
