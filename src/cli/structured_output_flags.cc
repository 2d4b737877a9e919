#include "cli/structured_output_flags.h"

#include <fstream>
#include <sstream>

namespace di::cli {

namespace {
Expected<std::string> read_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument(std::string(flag) + ": cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

void StructuredOutputFlags::add_to(CLI::App& app) {
  app.add_option("--json-schema", json_schema_file,
                 "constrain the output to this JSON Schema file");
  app.add_flag("--json-object", json_object, "constrain the output to any JSON object");
  app.add_option("--regex", regex, "constrain the output to this regular expression");
  app.add_option("--choice", choices, "constrain the output to one of these strings (repeatable)");
  app.add_option("--grammar", grammar_file, "constrain the output to this EBNF grammar file");
  app.add_flag("--lenient", lenient, "JSON Schema: ignore keywords the grammar cannot enforce");
}

Expected<std::optional<api::StructuredOutput>> StructuredOutputFlags::spec() const {
  using Kind = api::StructuredOutput::Kind;
  const int n = !json_schema_file.empty() + json_object + !regex.empty() + !choices.empty() +
                !grammar_file.empty();
  if (n == 0) return std::optional<api::StructuredOutput>();
  if (n > 1) {
    return invalid_argument(
        "give at most one of --json-schema, --json-object, --regex, --choice, --grammar");
  }
  api::StructuredOutput so;
  so.lenient = lenient;
  if (!json_schema_file.empty()) {
    so.kind = Kind::kJsonSchema;
    DI_ASSIGN_OR_RETURN(so.text, read_file(json_schema_file, "--json-schema"));
  } else if (json_object) {
    so.kind = Kind::kJsonObject;
  } else if (!regex.empty()) {
    so.kind = Kind::kRegex;
    so.text = regex;
  } else if (!choices.empty()) {
    so.kind = Kind::kChoice;
    so.choices = choices;
  } else {
    so.kind = Kind::kGrammar;
    DI_ASSIGN_OR_RETURN(so.text, read_file(grammar_file, "--grammar"));
  }
  return std::optional<api::StructuredOutput>(std::move(so));
}

}  // namespace di::cli
