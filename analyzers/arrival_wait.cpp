#include "analyzers/arrival_wait.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace partrain::analyzers {

namespace {

// E[max of n] = integral of x n phi(x) Phi(x)^(n-1) over x, by Simpson's rule over +-10 standard
// deviations (the integrand is below 1e-20 past them for any n a group has).
constexpr int kIntervals = 400;
constexpr double kFrom = -10, kTo = 10, kStep = (kTo - kFrom) / kIntervals;
// Group sizes tabulated at first use, in one pass over the grid (Phi^(n-1) by multiplication):
// recommend asks for the same few sizes for each of the tens of thousands of layouts it costs,
// and integrating one size costs about 16 us.
constexpr int kTabulated = 16384;

struct GridPoint {
  double x, weight, density, below;  // weight: Simpson's 1, 4, 2, ..., 4, 1
};

GridPoint grid_point(int i) {
  const double x = kFrom + i * kStep;
  const double weight = i == 0 || i == kIntervals ? 1 : (i % 2 == 1 ? 4 : 2);
  return {x, weight, std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi),
          0.5 * std::erfc(-x / std::numbers::sqrt2)};
}

const std::vector<double>& tabulated() {
  static const std::vector<double> table = [] {
    std::vector<double> e(kTabulated, 0.0);
    for (int i = 0; i <= kIntervals; ++i) {
      const GridPoint p = grid_point(i);
      double power = 1;  // Phi^(n-1)
      for (int n = 1; n < kTabulated; ++n, power *= p.below) {
        e[static_cast<size_t>(n)] += p.weight * p.x * n * p.density * power;
      }
    }
    for (double& value : e) value *= kStep / 3;
    e[0] = e[1] = 0;  // one rank waits for nobody
    return e;
  }();
  return table;
}

}  // namespace

double expected_max_of_normals(int n) {
  if (n <= 1) return 0;
  if (n < kTabulated) return tabulated()[static_cast<size_t>(n)];
  double sum = 0;
  for (int i = 0; i <= kIntervals; ++i) {
    const GridPoint p = grid_point(i);
    sum += p.weight * p.x * n * p.density * std::pow(p.below, n - 1);
  }
  return sum * kStep / 3;
}

std::string arrival_drift_text(const ArrivalDrift& drift) {
  std::string text;
  if (drift.jitter > 0) text = fmt::format("jitter {:.3g} ms^1/2", drift.jitter * std::sqrt(1e3));
  if (drift.rate_spread > 0) {
    text += fmt::format("{}rate spread {:.3g}% of the work", text.empty() ? "" : " and ",
                        100 * drift.rate_spread);
  }
  return text.empty() ? "none" : text;
}

double arrival_wait_s(const ArrivalDrift& drift, int ranks, double since_sync_s) {
  if (ranks <= 1 || since_sync_s <= 0) return 0;
  const double variance = drift.jitter * drift.jitter * since_sync_s +
                          drift.rate_spread * drift.rate_spread * since_sync_s * since_sync_s;
  return expected_max_of_normals(ranks) * std::sqrt(variance);
}

}  // namespace partrain::analyzers
