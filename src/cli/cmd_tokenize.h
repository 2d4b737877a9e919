// `deepinfer tokenize` / `deepinfer detokenize`: text <-> token ids with a tokenizer.json.
// main.cc dispatches here; argv[0] is the subcommand name. Exit codes: 0 ok, 1 bad input data
// (a line that is not the expected JSON), 2 bad flags or an unreadable/invalid tokenizer file.
#pragma once

namespace di::cli {

// deepinfer tokenize --tokenizer FILE [--jsonl] [--allow-special]
//   Reads all of stdin as one text (or, with --jsonl, one JSON string per line) and prints the
//   ids of each input as a JSON array on its own line. --allow-special matches added/special
//   token spellings (SpecialTokens::kAll); by default they are tokenized as plain text.
int run_tokenize_command(int argc, char** argv);

// deepinfer detokenize --tokenizer FILE [--jsonl] [--skip-special]
//   Reads one JSON array of ids per line. Prints the decoded texts back to back with nothing
//   added (so `tokenize | detokenize` reproduces the input), or with --jsonl one JSON string per
//   line.
int run_detokenize_command(int argc, char** argv);

}  // namespace di::cli
