#include "analyzers/arrival_wait.h"

#include <array>
#include <atomic>
#include <cmath>
#include <numbers>

namespace partrain::analyzers {

namespace {

double integrate_expected_max(int n) {
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) over x, by Simpson's rule over +-10 standard
  // deviations (the integrand is below 1e-20 past them for any n a group has).
  constexpr int kIntervals = 400;
  constexpr double kFrom = -10, kTo = 10, kStep = (kTo - kFrom) / kIntervals;
  const double count = static_cast<double>(n);
  auto integrand = [&](double x) {
    const double density = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    const double below = 0.5 * std::erfc(-x / std::numbers::sqrt2);
    return x * count * density * std::pow(below, count - 1);
  };
  double sum = integrand(kFrom) + integrand(kTo);
  for (int i = 1; i < kIntervals; ++i) sum += (i % 2 == 1 ? 4 : 2) * integrand(kFrom + i * kStep);
  return sum * kStep / 3;
}

}  // namespace

double expected_max_of_normals(int n) {
  if (n <= 1) return 0;
  // recommend asks for the same few group sizes once per layout it costs (tens of thousands):
  // each is integrated once. Two threads racing on one size store the same value.
  static std::array<std::atomic<double>, 16384> known{};
  if (static_cast<size_t>(n) >= known.size()) return integrate_expected_max(n);
  std::atomic<double>& slot = known[static_cast<size_t>(n)];
  double value = slot.load(std::memory_order_relaxed);
  if (value == 0) {
    value = integrate_expected_max(n);
    slot.store(value, std::memory_order_relaxed);
  }
  return value;
}

double arrival_wait_s(double jitter, int ranks, double since_sync_s) {
  if (jitter <= 0 || ranks <= 1 || since_sync_s <= 0) return 0;
  return expected_max_of_normals(ranks) * jitter * std::sqrt(since_sync_s);
}

}  // namespace partrain::analyzers
