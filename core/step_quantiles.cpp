#include "core/step_quantiles.h"

#include <algorithm>
#include <cmath>

namespace partrain {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  std::sort(values.begin(), values.end());
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double nearest_rank_quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size()));
  return values[std::max<size_t>(static_cast<size_t>(rank), 1) - 1];
}

}  // namespace partrain
