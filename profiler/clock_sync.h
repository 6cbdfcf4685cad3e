// Clock-offset estimation between this host and the rendezvous store's host, from ping round
// trips (Cristian's algorithm), plus a least-squares drift fit over offsets measured across a run.
// Pure arithmetic: the runner does the pinging and hands the samples over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace partrain::profiler {

// One ping: local monotonic time at send and at receive, and the server's monotonic reading.
struct PingSample {
  int64_t send_ns = 0;
  int64_t server_ns = 0;
  int64_t recv_ns = 0;
};

struct ClockOffset {
  int64_t offset_ns = 0;       // server clock minus local clock: local + offset = server time
  int64_t uncertainty_ns = 0;  // half the round trip of the sample used: the true offset is within
  size_t samples = 0;          // valid samples considered
};

// Uses the sample with the smallest round trip, whose midpoint is the tightest bound on when the
// server read its clock (Cristian 1989). Samples with recv < send are skipped; nullopt if none
// remain.
std::optional<ClockOffset> estimate_clock_offset(std::span<const PingSample> samples);

// An offset measured at a local instant (one estimate_clock_offset per sync round).
struct OffsetObservation {
  int64_t local_ns = 0;
  int64_t offset_ns = 0;
};

// offset(t) = offset_at_reference_ns + drift_ppm * 1e-6 * (t - reference_local_ns)
struct ClockDrift {
  int64_t reference_local_ns = 0;  // the observations' mean local time, keeps the fit well scaled
  double offset_at_reference_ns = 0;
  double drift_ppm = 0;  // how many ns the server clock gains per ms of local time
  size_t observations = 0;

  int64_t offset_at(int64_t local_ns) const;
};

// Ordinary least squares of offset against local time. A single observation (or all at the same
// instant) gives drift 0; nullopt when there are none.
std::optional<ClockDrift> fit_clock_drift(std::span<const OffsetObservation> observations);

}  // namespace partrain::profiler
