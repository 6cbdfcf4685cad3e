// Whether a followed run looks hung, and who holds it up: the one rule the metrics endpoint
// (metrics/hang_watch.h, which times silence on its own clock across refreshes) and `partrain
// top` (which times it on the trace's timeline, also in a single read for --once and --json)
// apply. Two sources: the launcher's flight-recorder diagnosis in the trace (the watchdog fired:
// a hang or desync, with the culprit it names), and before that, silence: a live run none of
// whose ranks has recorded anything for a while. Definitions: docs/metrics.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analyzers/live_run.h"

namespace partrain::analyzers {

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

// A rank that has recorded something: its latest record on the trace's timeline, and how long
// it has recorded nothing new, as the caller times it.
struct RankSilence {
  int rank = 0;
  int64_t last_event_ns = 0;
  int64_t quiet_ns = 0;
};

// The slowest rank's latest step, the scale of the silence rule.
int64_t slowest_step_ns(const LiveRun& run);

// The diagnosis when the trace has one; else a hang when the run is live and every rank in
// `silences` has been quiet for threshold_ns, the culprit being the rank whose latest record is
// the oldest (it stopped first, and the others then wait for it) when it stopped a step
// (kCulpritLeadFloorNs at least) before every other; none when they stopped within a step of
// each other, where the trace cannot tell the blocked from the culprit (the flight recorder's
// diagnosis will, once --collective-timeout fires). No hang from silence once the trace says
// tracing stopped: the ranks' records no longer reach it.
HangState judge_hang(const LiveRun& run, const std::vector<RankSilence>& silences);

// How long `rank` has recorded nothing, on the trace's timeline: from its latest record to now
// (the run's start plus its elapsed time, as the follower times it); nullopt unless the run is
// live and the rank has recorded something.
std::optional<int64_t> quiet_on_timeline_ns(const LiveRun& run, const RankStatus& rank);

// judge_hang with every live rank's silence on the trace's timeline: what one read can tell.
HangState judge_hang_on_timeline(const LiveRun& run);

}  // namespace partrain::analyzers
