// Quantiles of a stream of numbers in bounded memory, for the analyzers' p50/p90/p99 columns:
// exact while a sample holds at most kCapacity values, then over a uniform reservoir of that many
// (Vitter's algorithm R with a fixed seed, so a report is reproducible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partrain::analyzers {

class SampleQuantiles {
 public:
  static constexpr size_t kCapacity = 16384;

  void add(double value);
  int64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Linear interpolation between closest ranks (numpy's default): q in [0, 1]; 0 when empty.
  double quantile(double q) const;
  double median() const { return quantile(0.5); }

 private:
  std::vector<double> values_;
  mutable std::vector<double> sorted_;
  mutable bool sorted_valid_ = false;
  int64_t count_ = 0;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
};

}  // namespace partrain::analyzers
