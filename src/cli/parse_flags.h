// Flag parsing shared by every subcommand: --help prints and exits 0; a bad or missing flag prints
// CLI11's message (which names the flag) and the usage, and exits 2.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>

namespace di::cli {

// Returns -1 to continue, or the exit code.
inline int parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "deepinfer " << app.get_name() << ": " << e.what() << "\n" << app.help();
    return 2;
  }
  return -1;
}

}  // namespace di::cli

#define DI_PARSE_FLAGS(app, argc, argv)                               \
  do {                                                                \
    const int di_parse_rc_ = ::di::cli::parse_flags(app, argc, argv); \
    if (di_parse_rc_ >= 0) return di_parse_rc_;                       \
  } while (0)
