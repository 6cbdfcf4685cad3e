#include "runner/workload/param_init.h"

#include <cmath>

namespace partrain::runner {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

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
