// The median and nearest-rank quantiles partrain prints for step times, defined once so launch's
// run summary and analyze's breakdown give the same figures for the same steps
// (docs/analysis.md, "Step time").
#pragma once

#include <vector>

namespace partrain {

// The median: the middle value, the mean of the two middle values for an even count; 0 when empty.
double median(std::vector<double> values);

// The nearest-rank q-quantile (q in (0, 1]): the ⌈q n⌉-th smallest of the n values, a value the
// sample holds; the smallest for q <= 0; 0 when empty.
double nearest_rank_quantile(std::vector<double> values, double q);

}  // namespace partrain
