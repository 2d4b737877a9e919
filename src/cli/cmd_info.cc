#include <cstdio>
#include "cli/commands.h"
namespace di::cli {
int run_info_command(int, char**) { std::fprintf(stderr, "not yet\n"); return 2; }
}  // namespace di::cli
