// Counter-based hashing for deterministic streams (initial weights, synthetic data): the same
// input always gives the same well-mixed 64 bits, on every rank, with no state to carry.
#pragma once

#include <cstdint>

namespace partrain {

// splitmix64's finaliser (Steele et al. 2014): neighbouring inputs give unrelated outputs.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace partrain
