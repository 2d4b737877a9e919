// deepinfer: the single command-line entry point. Each subcommand lives in its own cmd_*.cc.
#include <cstdio>

int main(int argc, char** argv) {
  (void)argv;
  if (argc < 2) std::fprintf(stderr, "usage: deepinfer <command> [options]\n");
  return argc < 2 ? 2 : 0;
}
