// A run as the dashboard follows it, as plain data: its status, a row per rank (latest step and
// how it split, memory in use, latest collective), recent matched collectives, memory over
// time, recent slices for the timeline, and the analysis report of its latest window.
// LiveRunFollower (live_run_follower.h) keeps it up to date from a trace, live or finished,
// reading only what arrived; AnalysisCadence (analysis_cadence.h) refreshes its report. The
// dashboard (tui/) draws it and `partrain top --json` prints it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "analyzers/activity.h"
#include "analyzers/analysis_report.h"
#include "analyzers/rank_breakdown.h"
#include "analyzers/step_history.h"
#include "memory/category.h"

namespace partrain::analyzers {

inline constexpr size_t kMemoryCategories = memory::kAllCategories.size();
using CategoryBytes = std::array<int64_t, kMemoryCategories>;
// The bytes of every category together.
int64_t total_bytes(const CategoryBytes& bytes);

// The trace stores a collective when it finishes, so "current" is the rank's latest finished one;
// waited is how long it sat there before the last member arrived (its start to the latest
// member's start), or its whole duration until the other members' records arrive.
struct RankCollective {
  std::string op;
  std::string comm_id;
  int64_t seq = 0;
  int64_t end_ns = 0;
  int64_t waited_ns = 0;
  bool matched = false;
};

struct RankStatus {
  int rank = 0;
  std::string host;
  std::string device;
  std::optional<int64_t> step;  // latest completed step
  int64_t step_ns = 0;          // its duration
  // Its steps and their durations, summed, over every step the follower has read (counters: a
  // rate over them is the step rate and, divided, the mean step time).
  int64_t steps_total = 0;
  int64_t steps_total_ns = 0;
  std::optional<double> loss;
  // Tokens/s per GPU over its latest kThroughputWindowSteps steps (tokens_per_second).
  std::optional<double> tokens_per_s;
  // That step split as `partrain analyze` splits a window (window_ns is the step; compute +
  // exposed comm + exposed memcpy + idle = the step), from the slices read that overlap it.
  std::optional<RankBreakdown> breakdown;
  CategoryBytes memory_bytes{};  // in use now, per category
  int64_t memory_total() const;
  std::optional<RankCollective> collective;
  int64_t last_event_ns = 0;  // end of its latest recorded slice
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
};

// One (comm_id, seq) whose members have all been recorded.
// The matched collectives of a (comm, op, label) the follower has read, and their bytes (S each).
struct CollectiveTotals {
  int64_t ops = 0;
  int64_t bytes = 0;
};

struct MatchedCollective {
  std::string comm_id;
  int64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  int group_size = 0;
  std::string label;      // what its caller said it is for (moe_dispatch); empty: none
  int64_t time_ns = 0;    // the median member's time, as `analyze` takes p50 over members
  // nccl-tests' busbw for that time (bandwidth.h); none for an op that moves no bytes (a
  // barrier) or has no time yet: not a bandwidth of 0 B/s.
  std::optional<double> busbw_gbps;
  int64_t skew_ns = 0;    // last member's start - first member's start
  int64_t end_ns = 0;     // the last member's end
  int last_rank = 0;      // the member that arrived last
};

// A slice as the timeline draws it: compute, comm, memcpy or sync (containers are not drawn).
struct TimelineSlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  Activity kind = Activity::kCompute;
  bool gpu = false;  // a kernel (activity.h, on_gpu): an NCCL one does not make compute wait
};

struct StepMark {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t tokens = 0;  // this rank's (its data-parallel replica's) tokens in the step
  std::optional<double> loss;
};

struct MemoryPoint {
  int64_t ts_ns = 0;
  CategoryBytes bytes{};
};

// A rank's memory over time, as a chart draws it.
struct MemoryChart {
  std::deque<MemoryPoint> points;  // thinned to at most kMaxMemoryPoints, oldest first
  CategoryBytes peak{};            // over what has been read
  int64_t peak_total = 0;
  std::array<std::optional<int64_t>, kMemoryCategories> estimate{};  // memory::estimate_memory
  std::optional<int64_t> estimate_total;
};

// The analysis report of the run's latest window, refreshed on a cadence (analysis_cadence.h).
struct LiveAnalysis {
  std::string note;  // why there is no report yet, or what window it covers
  std::optional<AnalysisReport> report;
  int64_t computed_ns = 0;  // how long the last run of the analyses took
  bool available() const { return report.has_value(); }
  std::optional<int> straggler() const;
  const std::vector<Finding>& findings() const;  // empty without a report
};

struct LiveRun {
  std::string trace_path;
  std::string run_id;
  std::string status = "running";  // runs.status
  std::string command;
  int world_size = 0;
  bool imported = false;       // from `partrain import` (runs.config's imported_from)
  bool live = false;           // a writer holds the trace
  int64_t start_ns = 0;        // runs.start_ns
  int64_t end_ns = 0;          // latest time the trace shows (run end, or latest event)
  // The latest end of a slice or step: what the timeline follows (the run's end row comes a
  // teardown later, with nothing in between to draw).
  int64_t data_end_ns = 0;
  // Whether slices older than those held were skipped or evicted (partrain export has them).
  bool older_slices_dropped = false;
  int64_t elapsed_ns = 0;
  std::optional<int64_t> step;  // latest step every rank has completed
  // Over the latest throughput_steps steps every rank has completed (at most
  // kThroughputWindowSteps): one step's figure jumps with every hiccup.
  std::optional<double> tokens_per_s;
  int64_t throughput_steps = 0;
  std::deque<StepPoint> history;  // steps every rank has completed, ascending, bounded
  int64_t data_loss_events = 0;  // stat rows of severity data_loss/error, summed
  // The trace holds the stat trace_stopped: the writer stores nothing of the ranks' any more (a
  // full disk, --trace-max-size), so the figures read are stale while the run goes on.
  bool trace_stopped = false;
  // The launcher's flight-recorder diagnosis of a hang or desync (stat collective_diagnosis),
  // read with the stats: it shows at once, before the analyses run (and with no step recorded).
  std::optional<std::string> diagnosis;
  std::optional<int> diagnosis_culprit;  // the rank it blames, when it could tell
  std::vector<RankStatus> ranks;  // ascending
  std::deque<MatchedCollective> collectives;  // newest last, at most kMaxRecentCollectives
  // Keyed by (comm_id, op, label), every matched collective read so far (counters; the recent
  // ones above are bounded).
  std::map<std::tuple<std::string, std::string, std::string>, CollectiveTotals> collective_totals;
  std::map<int, MemoryChart> memory;
  std::map<int, std::deque<TimelineSlice>> slices;  // per rank, arrival order, bounded
  std::map<int, std::deque<StepMark>> steps;        // per rank, ascending, bounded
  LiveAnalysis analysis;

  static constexpr size_t kMaxRecentCollectives = 256;
  static constexpr size_t kMaxMemoryPoints = 2048;
  static constexpr size_t kMaxSlicesPerRank = 100'000;
  static constexpr size_t kMaxStepsPerRank = 4096;
  static constexpr size_t kMaxHistorySteps = 4096;
};

// Whether any rank's latest step recorded compute (analyze's compute_recorded, for the live
// view): a PyTorch CPU job's host work is not seen, and then its steps' compute, exposed
// communication and idle are unknown rather than 0 and the rest.
bool compute_recorded(const LiveRun& run);

// The row of `rank`, made (in rank order) when it is new.
RankStatus& rank_row(LiveRun& run, int rank);
// One memory sample of `rank`: bytes in use now, the peaks, and the chart (samples within a
// microsecond of the previous point update it; past kMaxMemoryPoints the chart is thinned by
// half, keeping the larger total of each pair so peaks stay visible).
void add_memory_sample(LiveRun& run, int rank, int64_t ts_ns, size_t category, int64_t bytes);

}  // namespace partrain::analyzers
