// Small comparison helpers for golden checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace di::check {

struct Diff {
  double max_abs = 0;
  double mean_abs = 0;
  int64_t count = 0;
};

// Over rows of `width` whose include[row] is true (all rows when include is empty).
inline Diff diff_rows(const float* a,
                      const float* b,
                      int64_t rows,
                      int64_t width,
                      const std::vector<bool>& include = {}) {
  Diff d;
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!include.empty() && !include[static_cast<size_t>(r)]) continue;
    for (int64_t i = 0; i < width; ++i) {
      double e = std::fabs(static_cast<double>(a[r * width + i]) - b[r * width + i]);
      if (std::isnan(e)) e = INFINITY;
      d.max_abs = std::max(d.max_abs, e);
      sum += e;
      ++d.count;
    }
  }
  d.mean_abs = d.count ? sum / static_cast<double>(d.count) : 0;
  return d;
}

inline std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

inline int64_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace di::check
