// Structured-output flags shared by CLI commands: --json-schema FILE, --json-object, --regex RE,
// --choice TEXT (repeatable), --grammar FILE (EBNF), --lenient.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/structured_output.h"

namespace di::cli {

struct StructuredOutputFlags {
  std::string json_schema_file, regex, grammar_file;
  std::vector<std::string> choices;
  bool json_object = false, lenient = false;

  void add_to(CLI::App& app);
  // nullopt when no flag was given; an error for two kinds at once or an unreadable file.
  Expected<std::optional<api::StructuredOutput>> spec() const;
};

}  // namespace di::cli
