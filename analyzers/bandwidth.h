// Collective bandwidth as nccl-tests defines it (doc/PERFORMANCE.md there): algbw = S / t, and
// busbw = algbw x a per-collective factor that makes it comparable to the link's peak.
#pragma once

#include <optional>
#include <string_view>

namespace partrain::analyzers {

// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n (S is the whole gathered
// buffer); broadcast, reduce, send, recv 1. nullopt for an op without a bus-bandwidth meaning.
std::optional<double> busbw_factor(std::string_view op, int nranks);

struct Bandwidth {
  double algbw_gbps = 0;  // 1 GB/s = 1e9 bytes/s, as nccl-tests
  double busbw_gbps = 0;
};
// bytes: the op's size S; seconds: its duration. Zero bandwidth for zero time.
Bandwidth collective_bandwidth(std::string_view op, double bytes, double seconds, int nranks);

}  // namespace partrain::analyzers
