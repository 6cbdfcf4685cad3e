#include "metrics/hang_watch.h"

#include <algorithm>
#include <climits>

namespace partrain::metrics {

void HangWatch::observe(const analyzers::LiveRun& run, int64_t now_ns) {
  for (const analyzers::RankStatus& rank : run.ranks) {
    if (rank.last_event_ns <= 0) continue;
    auto [it, inserted] = seen_.try_emplace(rank.rank, Seen{rank.last_event_ns, now_ns});
    if (!inserted && rank.last_event_ns > it->second.last_event_ns) {
      it->second = Seen{rank.last_event_ns, now_ns};
    }
  }
}

std::optional<int64_t> HangWatch::quiet_ns(int rank, int64_t now_ns) const {
  const auto it = seen_.find(rank);
  if (it == seen_.end()) return std::nullopt;
  return std::max<int64_t>(now_ns - it->second.read_at_ns, 0);
}

HangState HangWatch::state(const analyzers::LiveRun& run, int64_t now_ns) const {
  HangState hang;
  int64_t slowest_step_ns = 0;
  for (const analyzers::RankStatus& rank : run.ranks) {
    slowest_step_ns = std::max(slowest_step_ns, rank.step_ns);
  }
  hang.threshold_ns = std::max(kHangQuietFloorNs, kHangQuietSteps * slowest_step_ns);
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
  if (!run.live || run.status != "running" || run.trace_stopped || seen_.empty()) return hang;
  // Quiet is timed by when records were read; who stopped first, by the trace's own timeline
  // (records read in one refresh have one read time).
  std::optional<int> oldest;
  int64_t oldest_event = 0;
  int64_t next_event = INT64_MAX;  // the second-oldest rank's latest record
  for (const auto& [rank, seen] : seen_) {
    if (now_ns - seen.read_at_ns < hang.threshold_ns) return hang;  // this rank still records
    if (!oldest || seen.last_event_ns < oldest_event) {
      if (oldest) next_event = oldest_event;
      oldest = rank;
      oldest_event = seen.last_event_ns;
    } else {
      next_event = std::min(next_event, seen.last_event_ns);
    }
  }
  hang.hung = true;
  // Within a step the trace cannot say who is blocked (a collective is recorded when it ends, so
  // a rank waiting in one and the rank that never came both fall silent): a culprit only when
  // it stopped at least a step before every other rank.
  const int64_t lead = std::max(kCulpritLeadFloorNs, slowest_step_ns);
  if (seen_.size() == 1 || next_event - oldest_event >= lead) hang.culprit = oldest;
  return hang;
}

}  // namespace partrain::metrics
