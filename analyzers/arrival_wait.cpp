#include "analyzers/arrival_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace partrain::analyzers {

namespace {

// E[max of n]^k = integral of x^k n phi(x) Phi(x)^(n-1) over x, by Simpson's rule over +-10
// standard deviations (the integrand is below 1e-20 past them for any n a group has).
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

// The maximum of n standard normals' mean and mean square.
struct MaxMoments {
  double mean = 0, square = 0;
};

const std::vector<MaxMoments>& tabulated() {
  static const std::vector<MaxMoments> table = [] {
    std::vector<MaxMoments> m(kTabulated);
    for (int i = 0; i <= kIntervals; ++i) {
      const GridPoint p = grid_point(i);
      double power = 1;  // Phi^(n-1)
      for (int n = 1; n < kTabulated; ++n, power *= p.below) {
        const double mass = p.weight * n * p.density * power;
        m[static_cast<size_t>(n)].mean += mass * p.x;
        m[static_cast<size_t>(n)].square += mass * p.x * p.x;
      }
    }
    for (MaxMoments& moments : m) moments.mean *= kStep / 3, moments.square *= kStep / 3;
    m[0].mean = m[1].mean = 0;  // one rank waits for nobody
    return m;
  }();
  return table;
}

MaxMoments max_moments(int n) {
  if (n < kTabulated) return tabulated()[static_cast<size_t>(std::max(n, 0))];
  MaxMoments m;
  for (int i = 0; i <= kIntervals; ++i) {
    const GridPoint p = grid_point(i);
    const double mass = p.weight * n * p.density * std::pow(p.below, n - 1);
    m.mean += mass * p.x, m.square += mass * p.x * p.x;
  }
  m.mean *= kStep / 3, m.square *= kStep / 3;
  return m;
}

}  // namespace

double expected_max_of_normals(int n) { return n <= 1 ? 0 : max_moments(n).mean; }

double poisson_max_excess(int n, double mean) {
  if (n <= 1 || mean <= 0) return 0;
  // Past this the counts are normal but for their skew, 1 / sqrt(mean), which moves each
  // quantile z by (z^2 - 1) / 6 (Cornish-Fisher): E[max] - mean = e(n) sqrt(mean) + (E[z_max^2]
  // - 1) / 6, within 0.25% of the sum at 100 for any n up to 20,000 and closer beyond, where the
  // sum would cost a term per unit of sqrt(mean) for each of the search's layouts.
  constexpr double kNormalFrom = 100;
  if (mean > kNormalFrom) {
    const MaxMoments m = max_moments(n);
    return m.mean * std::sqrt(mean) + (m.square - 1) / 6;
  }
  // E[max] = sum over k >= 0 of P(max > k) = 1 - F(k)^n, F the Poisson CDF.
  const double last = mean + 12 * std::sqrt(mean) + 10;
  double sum = 0, pmf = std::exp(-mean), cdf = 0;
  for (int64_t k = 0;; ++k) {
    if (k > 0) pmf *= mean / static_cast<double>(k);
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
