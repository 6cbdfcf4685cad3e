#include "analyzers/interruption_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

namespace partrain::analyzers {

namespace {

// A kind's stretches of work are represented by this many of their quantiles: the fit evaluates
// every candidate rate at each, and a tp trace holds thousands of collectives of one kind.
constexpr size_t kQuantiles = 16;
// The scan over interruption rates: per decade, and from rates at which even the longest stretch
// holds 1/1000 of an interruption to rates at which the shortest holds 100 (a random walk there,
// the walk candidate's).
constexpr double kStepsPerDecade = 4;
constexpr double kFewest = 1e-3, kMost = 1e2;
constexpr int kRefinements = 30;  // golden-section steps between the scan's neighbours

struct Kind {
  int ranks = 0;
  double waits = 0;           // the measured waits' sum
  double count = 0;           // collectives
  double sqrt_works = 0;      // the sum of the square roots of their stretches of work (the walk's)
  std::vector<double> works;  // their stretches of work, then kQuantiles quantiles of them
};

// A candidate law's fit: its scale (the jitter for the walk, the interruption length otherwise)
// and the sum of squared relative errors of the kinds' mean waits.
struct Candidate {
  double per_s = 0;  // interruptions per second; 0: the random walk
  double scale = 0;
  double residual = 0;
};

// `unit(kind)`: the kind's predicted waits' sum at a scale of 1.
template <typename Unit>
Candidate fitted(const std::vector<Kind>& kinds, double per_s, Unit unit) {
  std::vector<double> units;
  double waits = 0, total = 0;
  for (const Kind& kind : kinds) {
    units.push_back(unit(kind));
    waits += kind.waits, total += units.back();
  }
  Candidate c{.per_s = per_s, .scale = total > 0 ? waits / total : 0};
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i].waits <= 0) continue;
    const double error = c.scale * units[i] / kinds[i].waits - 1;
    c.residual += error * error;
  }
  return c;
}

Candidate walk(const std::vector<Kind>& kinds) {
  return fitted(kinds, 0, [](const Kind& kind) {
    return expected_max_of_normals(kind.ranks) * kind.sqrt_works;
  });
}

Candidate interruptions(const std::vector<Kind>& kinds, double per_s) {
  return fitted(kinds, per_s, [per_s](const Kind& kind) {
    double sum = 0;
    for (double w : kind.works) sum += poisson_max_excess(kind.ranks, per_s * w);
    return kind.count * sum / static_cast<double>(kind.works.size());
  });
}

std::vector<Kind> kinds_of(const std::vector<SharedCoreWait>& waits) {
  std::map<int, Kind> by_kind;
  for (const SharedCoreWait& w : waits) {
    Kind& kind = by_kind[w.kind];
    const double work = std::max(0.0, w.since_sync_s);
    kind.ranks = w.ranks;
    kind.waits += w.wait_s;
    kind.count += 1;
    kind.sqrt_works += std::sqrt(work);
    kind.works.push_back(work);
  }
  std::vector<Kind> kinds;
  for (auto& [id, kind] : by_kind) {
    std::vector<double> all = std::move(kind.works);
    std::sort(all.begin(), all.end());
    const size_t n = std::min(kQuantiles, all.size());
    kind.works.clear();
    for (size_t q = 0; q < n; ++q) kind.works.push_back(all[(2 * q + 1) * all.size() / (2 * n)]);
    kinds.push_back(std::move(kind));
  }
  return kinds;
}

}  // namespace

std::optional<ArrivalDrift> fit_interruptions(const std::vector<SharedCoreWait>& waits) {
  const std::vector<Kind> kinds = kinds_of(waits);
  double total = 0, shortest = 0, longest = 0;
  for (const Kind& kind : kinds) {
    total += kind.waits;
    for (double w : kind.works) {
      if (w <= 0) continue;
      shortest = shortest > 0 ? std::min(shortest, w) : w;
      longest = std::max(longest, w);
    }
  }
  if (total <= 0 || longest <= 0) return std::nullopt;
  const Candidate random_walk = walk(kinds);
  // The scan, in log10 of the rate, then golden-section search around its best.
  const double from = std::log10(kFewest / longest), to = std::log10(kMost / shortest);
  const int steps = std::max(1, static_cast<int>(std::ceil((to - from) * kStepsPerDecade)));
  const double step = (to - from) / steps;
  auto at = [&](double log_rate) { return interruptions(kinds, std::pow(10, log_rate)); };
  Candidate best = at(from);
  for (int i = 1; i <= steps; ++i) {
    const Candidate c = at(from + i * step);
    if (c.residual < best.residual) best = c;
  }
  const double golden = (std::sqrt(5.0) - 1) / 2;
  double lo = std::log10(best.per_s) - step, hi = std::log10(best.per_s) + step;
  for (int i = 0; i < kRefinements; ++i) {
    const double a = hi - golden * (hi - lo), b = lo + golden * (hi - lo);
    if (at(a).residual < at(b).residual) {
      hi = b;
    } else {
      lo = a;
    }
  }
  if (const Candidate refined = at((lo + hi) / 2); refined.residual < best.residual) {
    best = refined;
  }
  // A walk fits as well whenever the data cannot tell (one kind, stretches alike): keep it then.
  constexpr double kBetter = 1e-9;
  if (best.residual >= random_walk.residual - kBetter || best.scale <= 0) {
    return ArrivalDrift{.jitter = random_walk.scale};
  }
  return ArrivalDrift{.jitter = best.scale * std::sqrt(best.per_s), .interruption_s = best.scale};
}

}  // namespace partrain::analyzers
