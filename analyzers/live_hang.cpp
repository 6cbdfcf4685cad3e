#include "analyzers/live_hang.h"

#include <algorithm>
#include <climits>

namespace partrain::analyzers {

int64_t slowest_step_ns(const LiveRun& run) {
  int64_t slowest = 0;
  for (const RankStatus& rank : run.ranks) slowest = std::max(slowest, rank.step_ns);
  return slowest;
}

HangState judge_hang(const LiveRun& run, const std::vector<RankSilence>& silences) {
  HangState hang;
  const int64_t slowest = slowest_step_ns(run);
  hang.threshold_ns = std::max(kHangQuietFloorNs, kHangQuietSteps * slowest);
  if (run.diagnosis) {
    hang.hung = true;
    hang.diagnosed = true;
    hang.culprit = run.diagnosis_culprit;
    return hang;
  }
  if (const auto& report = run.analysis.report; report && report->outcome.diagnosis) {
    hang.hung = true;
    hang.diagnosed = true;
    hang.culprit = report->outcome.diagnosis_culprit;
    return hang;
  }
  // Once tracing stopped, no rank's records reach the trace any more though the ranks go on:
  // silence says nothing then (the flight recorder's diagnosis above still does).
  if (!run.live || run.status != "running" || run.trace_stopped || silences.empty()) return hang;
  // Quiet is timed as the caller times it; who stopped first, by the trace's own timeline.
  std::optional<int> oldest;
  int64_t oldest_event = 0;
  int64_t next_event = INT64_MAX;  // the second-oldest rank's latest record
  for (const RankSilence& s : silences) {
    if (s.quiet_ns < hang.threshold_ns) return hang;  // this rank still records
    if (!oldest || s.last_event_ns < oldest_event) {
      if (oldest) next_event = oldest_event;
      oldest = s.rank;
      oldest_event = s.last_event_ns;
    } else {
      next_event = std::min(next_event, s.last_event_ns);
    }
  }
  hang.hung = true;
  // Within a step the trace cannot say who is blocked (a collective is recorded when it ends, so
  // a rank waiting in one and the rank that never came both fall silent): a culprit only when
  // it stopped at least a step before every other rank.
  const int64_t lead = std::max(kCulpritLeadFloorNs, slowest);
  if (silences.size() == 1 || next_event - oldest_event >= lead) hang.culprit = oldest;
  return hang;
}

std::optional<int64_t> quiet_on_timeline_ns(const LiveRun& run, const RankStatus& rank) {
  if (!run.live || rank.last_event_ns <= 0) return std::nullopt;
  const int64_t now = run.start_ns + run.elapsed_ns;
  return std::max<int64_t>(now - rank.last_event_ns, 0);
}

HangState judge_hang_on_timeline(const LiveRun& run) {
  std::vector<RankSilence> silences;
  for (const RankStatus& rank : run.ranks) {
    if (const std::optional<int64_t> quiet = quiet_on_timeline_ns(run, rank)) {
      silences.push_back({rank.rank, rank.last_event_ns, *quiet});
    }
  }
  return judge_hang(run, silences);
}

}  // namespace partrain::analyzers
