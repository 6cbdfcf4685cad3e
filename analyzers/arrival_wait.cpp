#include "analyzers/arrival_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

double poisson_max_excess(int n, double mean) {
  if (n <= 1 || mean <= 0) return 0;
  // Past this the counts are normal to well within the fit's noise, and summing the tail term by
  // term would cost a microsecond per thousand of mean.
  constexpr double kNormalFrom = 1e4;
  if (mean > kNormalFrom) return expected_max_of_normals(n) * std::sqrt(mean);
  // E[max] = sum over k >= 0 of P(max > k) = 1 - F(k)^n, F the Poisson CDF. Below 12 standard
  // deviations under the mean F is under 1e-30: those terms are 1.
  const double spread = std::sqrt(mean);
  const int64_t first = std::max<int64_t>(0, static_cast<int64_t>(mean - 12 * spread - 10));
  const double last = mean + 12 * spread + 10;
  double sum = static_cast<double>(first);
  double pmf = std::exp(static_cast<double>(first) * std::log(mean) - mean -
                        std::lgamma(static_cast<double>(first) + 1));
  double cdf = 0;
  for (int64_t k = first;; ++k) {
    if (k > first) pmf *= mean / static_cast<double>(k);
    cdf += pmf;
    const double above = std::max(0.0, 1 - cdf);  // P(count > k)
    // 1 - (1 - above)^n without cancellation when `above` is tiny.
    const double term = -std::expm1(static_cast<double>(n) * std::log1p(-above));
    sum += term;
    // Past the mean the terms fall fast; 12 standard deviations above it they are under 1e-30
    // (the CDF's rounding, ~1e-16, would otherwise keep them from falling below it).
    if (static_cast<double>(k) > mean && (term < 1e-15 || static_cast<double>(k) > last)) break;
  }
  return std::max(0.0, sum - mean);
}

std::string arrival_drift_text(const ArrivalDrift& drift) {
  std::string text;
  if (drift.jitter > 0) {
    text = fmt::format("jitter {:.3g} ms^1/2", drift.jitter * std::sqrt(1e3));
    if (drift.interruption_s > 0) {
      const double per_s = std::pow(drift.jitter / drift.interruption_s, 2);
      text += fmt::format(" in interruptions of {:.3g} ms ({:.3g}/s)", 1e3 * drift.interruption_s,
                          per_s);
    }
  }
  if (drift.rate_spread > 0) {
    text += fmt::format("{}rate spread {:.3g}% of the work", text.empty() ? "" : " and ",
                        100 * drift.rate_spread);
  }
  return text.empty() ? "none" : text;
}

double arrival_wait_s(const ArrivalDrift& drift, int ranks, double since_sync_s) {
  if (ranks <= 1 || since_sync_s <= 0) return 0;
  const double e = expected_max_of_normals(ranks);
  double interrupted = e * drift.jitter * std::sqrt(since_sync_s);
  if (drift.jitter > 0 && drift.interruption_s > 0) {
    const double d = drift.interruption_s;
    interrupted =
        d * poisson_max_excess(ranks, drift.jitter * drift.jitter * since_sync_s / (d * d));
  }
  return std::hypot(interrupted, e * drift.rate_spread * since_sync_s);
}

}  // namespace partrain::analyzers
