// Clock offsets between the hosts of an imported trace, from collectives whose members finish
// together (an all-reduce ends within about one message latency on every member): for each such
// collective, the difference between two hosts' end times is one estimate of the offset between
// their clocks. Ranks on one host share its clock and are never shifted against each other.
// Offsets are the median estimate; the uncertainty is the half-width holding 90% of the
// estimates, summed along the chain of hosts that links a host to the reference one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace partrain::profiler {

// Where one rank finished one matched collective, on that rank's own clock.
struct CollectiveEnd {
  std::string comm_id;
  uint64_t seq = 0;
  int rank = 0;
  int64_t end_ns = 0;
};

struct RankClockFit {
  int64_t offset_ns = 0;  // add to the rank's clock to reach the reference host's
  int64_t uncertainty_ns = 0;
  int64_t estimates = 0;  // collectives behind it (0 for the reference host and its ranks)
  bool aligned = true;    // false: no collective links its host to the reference host
};

// `clock_of_rank`: every rank, with the clock it reads (its host's name; "" when unknown: that
// rank's clock is its own). The reference clock is the lowest rank's.
std::map<int, RankClockFit> align_clocks_by_collectives(
    const std::map<int, std::string>& clock_of_rank, std::vector<CollectiveEnd> ends);

}  // namespace partrain::profiler
