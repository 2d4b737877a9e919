// DI_CHECK guards internal invariants (never input): on failure it prints file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define DI_CHECK(cond)                                                                   \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "DI_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
