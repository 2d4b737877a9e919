// A check of Ops::sample_rows' arguments for backends that index device copies of the lists
// (kept out of sample_row.h, which every Ops user includes).
#pragma once

#include <cstdint>

#include "kernels/ref/sample_row.h"

namespace di::kernels::sample {

// Whether every row's list ranges, mask rows and token ids lie inside `a` and [0, cols).
bool args_in_range(const RowsArgs& a, int64_t rows, int64_t cols);

}  // namespace di::kernels::sample
