// The CUDA cores' fp32 rates, measured: independent FMA chains and the same chains as a rounded
// multiply then a rounded add (two instructions per multiply-add, the order the bitwise-exact
// dense kernels keep). Both in FLOP/s counting a multiply-add as 2, like a GEMM's 2 M N K.
#pragma once

#include "util/status.h"

namespace di::bench {

struct Fp32Peaks {
  double fma_flops = 0, mul_add_flops = 0;
};
Expected<Fp32Peaks> measure_fp32_peaks();

// Nanoseconds per step of one dependent chain of rounded fp32 adds (one thread): the latency
// floor of kernels::dot_f32's lane chains, which no schedule of the same bits can go under.
Expected<double> measure_dependent_fadd_ns();

}  // namespace di::bench
