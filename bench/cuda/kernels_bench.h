// The CUDA kernel benchmark as a library: `deepinfer bench kernels` and the standalone
// cuda_kernels_bench both call it. argv[0] is the command name; the flags follow.
#pragma once

namespace di::bench {

int run_kernels_bench(int argc, char** argv);

}  // namespace di::bench
