// Straggler analysis of `partrain analyze`: how late each rank arrives at the collectives it
// shares with others (start minus the earliest member's start, per matched (comm_id, seq)), how
// often it is the last to arrive, and which rank, if any, holds the others up.
// Definitions and thresholds: docs/analysis-collectives.md.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/collective_groups.h"
#include "analyzers/finding.h"
#include "analyzers/rank_rows.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// Lateness of a member at a matched collective: its start minus the earliest member's start.
// A collective is "delayed" when its skew (the last member's lateness) is >= kDelayedSkewMs:
// in a synchronous job a slow rank holds the others up at the first collective after its delay
// and the ones that follow start together, so only delayed collectives say who waits for whom.
struct RankLateness {
  int rank = 0;
  int64_t matched = 0;        // matched collectives it took part in (in the window)
  int64_t delayed = 0;        // of those, delayed ones
  int64_t last = 0;           // delayed ones where it started last
  double last_share = 0;      // last / delayed
  double late_p50_ms = 0;     // its lateness where it was last (how long the others waited)
  double late_p90_ms = 0;
  // that lateness / steps in the window: the score. Lateness at collectives in flight together
  // (several communicators held up at once) counts once: the union of the waits on the timeline.
  double wait_per_step_ms = 0;
  double step_share = 0;        // wait_per_step_ms / mean step time
  double wait_share = 0;        // its waiting / the waiting all analysed ranks cause
  std::string last_op;          // the op it is most often last at ("all_reduce")
  double last_op_share = 0;     // share of that op's delayed collectives where it is last
  double late_max_ms = 0;
  // Lateness that recurs now and then, far above its usual (late_p50): the times it was that
  // late (0: none, or too often to be intermittent), how late at the median, and the steps.
  int64_t late_spikes = 0;
  double spike_p50_ms = 0;
  std::vector<int64_t> spike_steps;  // the rank's steps they fell in, ascending; unique
  // One lateness far over the rank's usual (kSpikeFactor times it and kSpikeFactor times the
  // noise floor) that is most of the waiting it caused: rank 0 writing a checkpoint alone while
  // the others wait at a barrier. Once is no pattern for the spikes above, and the rank's usual
  // lateness is within noise, yet the time was lost at that one collective.
  struct HoldUp {
    double late_ms = 0;
    std::string op;
    std::string comm_id;
    uint64_t seq = 0;
    std::optional<int64_t> step;  // the rank's step it fell in; none outside its steps
    // The median of the rank's other latenesses (where it arrived last); none when this was the
    // only time it arrived last.
    std::optional<double> usual_late_ms;
  };
  std::optional<HoldUp> hold_up;
  // Its lateness is within the run's own noise (kLatenessNoiseMs, or the other ranks' own
  // lateness when they arrive last, plus kDelayedSkewMs): set on the straggler only, never on
  // one with spikes or a hold-up.
  bool within_noise = false;
};

struct StragglerReport {
  std::vector<RankLateness> ranks;  // analysed ranks with matched collectives, ascending
  // Median step of the analysed ranks in the window; without steps the window is one step and
  // this is its duration.
  double median_step_ms = 0;
  double mean_step_ms = 0;          // the step_share's denominator (the wait is a mean too)
  int64_t steps = 0;                // steps in the window (1 without steps)
  bool stepless = false;            // no steps: the window is the one "step"
  // The waiting all analysed ranks cause, per step: the union of their waits on the timeline
  // (groups held up together count once), so at most the window's wall time.
  double wait_per_step_ms = 0;
  // The other ranks' own lateness where they arrived last (median; 0 for fewer than 3 times):
  // how late a rank is in this run without being slow.
  double others_late_ms = 0;
  std::optional<int> straggler;     // the highest score that clears the thresholds
  bool warm_up_only = false;        // the window is the warm-up step (AnalysisWindow's)
};

// A collective whose members start less than this apart is in sync (noise).
inline constexpr double kDelayedSkewMs = 1.0;
// The straggler: the rank with the highest wait_per_step_ms (the score) that causes at least
// min(1, max(kMinWaitShare, kChanceFactor / ranks)) of the waiting of all analysed ranks (75%
// with two ranks, where either noisy rank causes half by chance), makes the others wait
// >= kMinWaitMs per step and >= kMinStepShare of the mean step.
inline constexpr double kMinWaitShare = 0.5;
inline constexpr double kChanceFactor = 1.5;
inline constexpr double kMinWaitMs = 1.0;
inline constexpr double kMinStepShare = 0.02;
// Host scheduling alone makes one rank of a healthy job 1-2 ms late at most collectives (a
// 2-rank gloo DDP job with no fault: 1.7-2.0 ms, last at 80-95% of delayed all-reduces): a
// straggler late by less than this at the median, or by less than the others' own lateness
// plus kDelayedSkewMs, is within noise and named at info severity only.
inline constexpr double kLatenessNoiseMs = 2.0;
// A rank's lateness spikes when some of it is this many times its median and over the noise.
inline constexpr double kSpikeFactor = 4.0;

namespace detail {
struct StragglerRanks;
}

// The analysis as one consumer of a pass over the groups (for_each_collective_group), so
// `partrain analyze` reads the groups once for it and the collective statistics together.
class StragglerPass {
 public:
  StragglerPass();
  ~StragglerPass();
  StragglerPass(const StragglerPass&) = delete;
  StragglerPass& operator=(const StragglerPass&) = delete;
  // Valid while this pass lives.
  GroupVisitor visitor();
  // Once, after the pass has seen every group; reads the window's step times.
  StatusOr<StragglerReport> finish(const profiler::TraceReader& reader,
                                   const AnalysisWindow& window);

 private:
  std::unique_ptr<detail::StragglerRanks> ranks_;
};

// A pass of its own over the window's groups.
StatusOr<StragglerReport> analyze_stragglers(const profiler::TraceReader& reader,
                                             const AnalysisWindow& window);
// `compute_recorded`: whether the ranks' compute is in the trace (analyze's breakdown); a PyTorch
// CPU job's is not, and its straggler's advice names what to look at on a host, not a GPU.
std::vector<Finding> straggler_findings(const StragglerReport& report,
                                        bool compute_recorded = true);
// Every rank, or past kRanksPrintedInFull the ones rank_rows.h picks (the straggler always).
std::string format_stragglers(const StragglerReport& report, RankRowOptions rows = {});
nlohmann::json stragglers_json(const StragglerReport& report);

}  // namespace partrain::analyzers
