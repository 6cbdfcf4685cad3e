// Where each rank's time goes over the analysis window: compute, communication, memcpy and idle
// as interval unions, how much communication hides under compute, and step-time statistics
// (DESIGN.md "Analyses"; formulas in docs/analysis.md). Streams slices in time order per track,
// so memory stays flat whatever the trace's size.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::analyzers {

// Step durations (steps.dur_ns) of one rank's steps inside the window.
struct StepTimes {
  int64_t count = 0;
  double median_ns = 0;
  double p90_ns = 0;  // nearest rank: the smallest duration >= 90% of them
  double mean_ns = 0;
};

// Times in ns over one rank's window. compute/comm/memcpy are each a union of intervals, so
// nested or concurrent slices of one kind count once.
struct RankBreakdown {
  int rank = 0;
  int64_t window_ns = 0;
  int64_t steps = 0;          // steps in the window (0: a trace without steps)
  int64_t compute_ns = 0;     // |compute ∪ kernel slices|
  int64_t comm_ns = 0;        // |collective ∪ p2p slices|
  int64_t memcpy_ns = 0;      // |memcpy ∪ memset slices|
  int64_t overlap_ns = 0;     // |compute ∩ comm|
  int64_t busy_ns = 0;        // |compute ∪ comm ∪ memcpy|
  int64_t compute_or_comm_ns = 0;  // |compute ∪ comm|
  // Idle time inside phase slices (forward, backward, optimizer...): work recorded only as a
  // phase, such as a host-side optimizer update, or waits inside it. |phases ∪ busy| - |busy|.
  int64_t idle_in_phases_ns = 0;
  StepTimes step_times;

  int64_t idle_ns() const { return window_ns - busy_ns; }
  int64_t exposed_comm_ns() const { return comm_ns - overlap_ns; }             // comm \ compute
  int64_t exposed_memcpy_ns() const { return busy_ns - compute_or_comm_ns; }   // memcpy alone
  int64_t compute_only_ns() const { return compute_ns - overlap_ns; }          // compute \ comm
  // |compute ∩ comm| / |comm|; nullopt without communication.
  std::optional<double> overlap_pct() const;
  double pct_of_window(int64_t ns) const;             // 0 for an empty window
  std::optional<double> ms_per_step(int64_t ns) const;  // nullopt without steps
};

struct TemporalBreakdown {
  bool has_steps = false;
  std::vector<RankBreakdown> ranks;  // ascending rank
};

StatusOr<TemporalBreakdown> analyze_temporal_breakdown(const profiler::SqliteDb& db,
                                                       const AnalysisWindow& window);
// "exposed_communication", "idle", "compute_imbalance".
std::vector<Finding> temporal_findings(const TemporalBreakdown& report);
std::string format_temporal_breakdown(const TemporalBreakdown& report);
// The "ranks" array of `partrain analyze --json`.
nlohmann::json temporal_breakdown_json(const TemporalBreakdown& report);

// Accumulates |union| of intervals fed in order of start (exposed for tests).
class IntervalUnion {
 public:
  void add(int64_t start, int64_t end);
  int64_t total_ns() const { return total_ + (open_ ? end_ - start_ : 0); }

 private:
  bool open_ = false;
  int64_t start_ = 0, end_ = 0, total_ = 0;
};

}  // namespace partrain::analyzers
