#include "profiler/clock_sync.h"

#include <cmath>

namespace partrain::profiler {

std::optional<ClockOffset> estimate_clock_offset(std::span<const PingSample> samples) {
  const PingSample* best = nullptr;
  size_t valid = 0;
  for (const PingSample& sample : samples) {
    if (sample.recv_ns < sample.send_ns) continue;
    ++valid;
    if (best == nullptr || sample.recv_ns - sample.send_ns < best->recv_ns - best->send_ns) {
      best = &sample;
    }
  }
  if (best == nullptr) return std::nullopt;
  const int64_t rtt_ns = best->recv_ns - best->send_ns;
  const int64_t local_midpoint_ns = best->send_ns + rtt_ns / 2;
  return ClockOffset{best->server_ns - local_midpoint_ns, rtt_ns / 2, valid};
}

int64_t ClockDrift::offset_at(int64_t local_ns) const {
  const double elapsed_ns = static_cast<double>(local_ns - reference_local_ns);
  return std::llround(offset_at_reference_ns + drift_ppm * 1e-6 * elapsed_ns);
}

std::optional<ClockDrift> fit_clock_drift(std::span<const OffsetObservation> observations) {
  if (observations.empty()) return std::nullopt;
  // Work relative to the first observation: absolute ns (~1e18) squared would lose all precision.
  const OffsetObservation& origin = observations.front();
  const double n = static_cast<double>(observations.size());
  double mean_t = 0;
  double mean_offset = 0;
  for (const auto& o : observations) {
    mean_t += static_cast<double>(o.local_ns - origin.local_ns) / n;
    mean_offset += static_cast<double>(o.offset_ns - origin.offset_ns) / n;
  }
  double covariance = 0;
  double variance = 0;
  for (const auto& o : observations) {
    const double dt = static_cast<double>(o.local_ns - origin.local_ns) - mean_t;
    const double doffset = static_cast<double>(o.offset_ns - origin.offset_ns) - mean_offset;
    covariance += dt * doffset;
    variance += dt * dt;
  }
  ClockDrift drift;
  drift.observations = observations.size();
  drift.reference_local_ns = origin.local_ns + std::llround(mean_t);
  // Rounding the reference time moves it by < 1 ns; at ppm-scale slopes that shifts the offset
  // by far less than a nanosecond, so the mean offset stays the intercept there.
  drift.offset_at_reference_ns = static_cast<double>(origin.offset_ns) + mean_offset;
  drift.drift_ppm = variance > 0 ? covariance / variance * 1e6 : 0.0;
  return drift;
}

}  // namespace partrain::profiler
