// SampleQuantiles: exact quantiles of small samples, reservoir-sampled ones of large streams.
#include "analyzers/sample_quantiles.h"

#include <algorithm>
#include <cmath>

namespace partrain::analyzers {

void SampleQuantiles::add(double value) {
  ++count_;
  sorted_valid_ = false;
  if (values_.size() < kCapacity) {
    values_.push_back(value);
    return;
  }
  // splitmix64: a cheap deterministic generator is enough to pick reservoir slots.
  rng_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = rng_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint64_t slot = z % static_cast<uint64_t>(count_);
  if (slot < kCapacity) values_[slot] = value;
}

double SampleQuantiles::quantile(double q) const {
  if (values_.empty()) return 0;
  if (!sorted_valid_) {
    sorted_ = values_;
    std::sort(sorted_.begin(), sorted_.end());
    sorted_valid_ = true;
  }
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted_.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted_.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted_[below] + (sorted_[above] - sorted_[below]) * fraction;
}

}  // namespace partrain::analyzers
