#include "runner/workload/param_init.h"

#include <cmath>

#include "core/hash.h"

namespace partrain::runner {
namespace {

// (0, 1]: never 0, so the logarithm below is finite.
double unit_interval(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

}  // namespace

float init_normal(uint64_t seed, uint64_t param_id, uint64_t index) {
  uint64_t key = splitmix64(seed ^ splitmix64(param_id * 0x100000001b3ULL + 0x51ed27));
  uint64_t a = splitmix64(key ^ (2 * index));
  uint64_t b = splitmix64(key ^ (2 * index + 1));
  double radius = std::sqrt(-2.0 * std::log(unit_interval(a)));
  return static_cast<float>(radius * std::cos(6.283185307179586 * unit_interval(b)));
}

}  // namespace partrain::runner
