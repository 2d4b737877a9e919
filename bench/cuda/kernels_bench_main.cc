// cuda_kernels_bench: the kernel benchmark without the rest of the CLI (what the device runs
// when only kernels changed).
#include "cuda/kernels_bench.h"

int main(int argc, char** argv) {
  return di::bench::run_kernels_bench(argc, argv);
}
