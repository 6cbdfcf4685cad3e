#include "analyzers/rank_breakdown.h"

#include <algorithm>

namespace partrain::analyzers {

void IntervalUnion::add(int64_t start, int64_t end) {
  if (open_ && start <= end_) {
    end_ = std::max(end_, end);
    return;
  }
  if (open_) total_ += end_ - start_;
  open_ = true;
  start_ = start;
  end_ = end;
}

void BusyTime::add(int64_t start_ns, int64_t end_ns, Activity activity, bool gpu) {
  const int64_t start = std::max(start_ns, start_ns_);
  const int64_t end = std::min(end_ns, end_ns_);
  if (end <= start) return;
  switch (activity) {
    case Activity::kCompute: compute_.add(start, end); break;
    case Activity::kComm: comm_.add(start, end); break;
    case Activity::kMemcpy: memcpy_.add(start, end); break;
    case Activity::kPhase: phases_or_busy_.add(start, end); return;
    case Activity::kSync:
    case Activity::kStep: return;
  }
  phases_or_busy_.add(start, end);
  if (activity != Activity::kMemcpy) compute_or_comm_.add(start, end);
  const bool host_comm = activity == Activity::kComm && !gpu;
  if (host_comm) host_comm_.add(start, end);
  if (host_comm || activity == Activity::kCompute) compute_or_host_comm_.add(start, end);
  busy_.add(start, end);
}

void BusyTime::fill(RankBreakdown& out) const {
  out.window_ns = end_ns_ - start_ns_;
  out.compute_ns = compute_.total_ns();
  out.comm_ns = comm_.total_ns();
  out.memcpy_ns = memcpy_.total_ns();
  out.compute_or_comm_ns = compute_or_comm_.total_ns();
  out.overlap_ns = out.compute_ns + out.comm_ns - out.compute_or_comm_ns;
  out.host_comm_ns = host_comm_.total_ns();
  out.compute_or_host_comm_ns = compute_or_host_comm_.total_ns();
  out.busy_ns = busy_.total_ns();
  out.idle_in_phases_ns = phases_or_busy_.total_ns() - out.busy_ns;
}

std::optional<double> RankBreakdown::overlap_pct() const {
  if (comm_ns <= 0) return std::nullopt;
  return 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(comm_ns);
}

double RankBreakdown::pct_of_window(int64_t ns) const {
  return window_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(window_ns) : 0.0;
}

std::optional<double> RankBreakdown::ms_per_step(int64_t ns) const {
  if (steps <= 0) return std::nullopt;
  return static_cast<double>(ns) / 1e6 / static_cast<double>(steps);
}

}  // namespace partrain::analyzers
