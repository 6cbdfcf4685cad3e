// Whether a followed run looks hung, and who holds it up, for the metrics endpoint. Two sources:
// the launcher's flight-recorder diagnosis in the trace (the watchdog fired: a hang or desync,
// with the culprit it names), and before that, silence: a live run none of whose ranks has
// recorded anything for a while. A rank's silence is timed on this host's clock from when its
// latest record was first read, so neither the clocks of other nodes nor the trace's flush
// latency enter it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "analyzers/live_run.h"

namespace partrain::metrics {

// Silence counts as a hang once every rank has been quiet for the longer of these: a fixed
// floor (steps of a young run, a checkpoint write) and a multiple of the slowest rank's latest
// step (a run whose steps are minutes long is not hung after 30 s).
inline constexpr int64_t kHangQuietFloorNs = 30'000'000'000;
inline constexpr int64_t kHangQuietSteps = 10;
// The silent rank is named the culprit when its latest record precedes every other rank's by at
// least the longer of this and the slowest rank's latest step.
inline constexpr int64_t kCulpritLeadFloorNs = 1'000'000'000;

struct HangState {
  bool hung = false;
  bool diagnosed = false;      // from the flight-recorder diagnosis, not from silence
  std::optional<int> culprit;  // the rank holding the others up, when one can be named
  int64_t threshold_ns = 0;    // the silence that counts as a hang for this run now
};

class HangWatch {
 public:
  // Notes, at now_ns (this host's monotonic clock), which ranks recorded something new.
  void observe(const analyzers::LiveRun& run, int64_t now_ns);
  // How long `rank` has recorded nothing new, as observed; nullopt before its first record.
  std::optional<int64_t> quiet_ns(int rank, int64_t now_ns) const;
  // The diagnosis when the trace has one; else a hang when the run is live and every rank that
  // recorded anything has been quiet for threshold_ns, the culprit being the rank whose latest
  // record is the oldest (it stopped first, and the others then wait for it) when it stopped a
  // step (kCulpritLeadFloorNs at least) before every other; none when they stopped within a step
  // of each other, where the trace cannot tell the blocked from the culprit (the flight
  // recorder's diagnosis will, once --collective-timeout fires). No hang from silence once the
  // trace says tracing stopped: the ranks' records no longer reach it.
  HangState state(const analyzers::LiveRun& run, int64_t now_ns) const;

 private:
  struct Seen {
    int64_t last_event_ns = 0;  // the rank's latest record, on the trace's timeline
    int64_t read_at_ns = 0;     // when it was first read, on this host's clock
  };
  std::map<int, Seen> seen_;
};

}  // namespace partrain::metrics
