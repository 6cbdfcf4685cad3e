// What the dashboard shows, as plain data: the run's status, a row per rank, recent matched
// collectives, memory over time, recent slices for the timeline and the analyzers' findings.
// TraceFollower (trace_follower.h) fills it from a trace, the views (views.h) draw it, and
// `partrain top --json` prints it (view_model_json), so all three agree on every number.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/collective_stats.h"
#include "analyzers/finding.h"
#include "memory/category.h"

namespace partrain::tui {

inline constexpr size_t kMemoryCategories = memory::kAllCategories.size();
using CategoryBytes = std::array<int64_t, kMemoryCategories>;
// The bytes of every category together.
int64_t total_bytes(const CategoryBytes& bytes);

// A rank's last completed step split as docs/analysis.md does it (compute + exposed comm +
// exposed memcpy + idle = the step), from the slices that overlap the step.
struct StepBreakdown {
  int64_t step_ns = 0;
  int64_t compute_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t exposed_memcpy_ns = 0;
  int64_t idle_ns() const { return step_ns - compute_ns - exposed_comm_ns - exposed_memcpy_ns; }
};

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
  std::optional<double> loss;
  std::optional<StepBreakdown> breakdown;
  CategoryBytes memory_bytes{};  // in use now, per category
  int64_t memory_total() const;
  std::optional<RankCollective> collective;
  int64_t last_event_ns = 0;  // end of its latest recorded slice
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
};

// One (comm_id, seq) whose members have all been recorded.
struct MatchedCollective {
  std::string comm_id;
  int64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  int group_size = 0;
  int64_t time_ns = 0;   // the median member's duration, as `analyze` takes p50 over members
  double busbw_gbps = 0; // nccl-tests' busbw for that time (analyzers/bandwidth.h)
  int64_t skew_ns = 0;   // last member's start - first member's start
  int64_t end_ns = 0;    // the last member's end
  int last_rank = 0;     // the member that arrived last
};

// A slice as the timeline draws it.
enum class SliceKind : uint8_t { kCompute, kComm, kMemcpy, kSync };
struct TimelineSlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  SliceKind kind = SliceKind::kCompute;
};

struct StepMark {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t tokens = 0;  // this rank's (its data-parallel replica's) tokens in the step
};

struct MemoryPoint {
  int64_t ts_ns = 0;
  CategoryBytes bytes{};
};

struct RankMemory {
  std::deque<MemoryPoint> points;  // thinned to at most kMaxMemoryPoints, oldest first
  CategoryBytes peak{};            // over what this dashboard has read
  int64_t peak_total = 0;
  std::array<std::optional<int64_t>, kMemoryCategories> estimate{};  // memory::estimate_memory
  std::optional<int64_t> estimate_total;
};

// The heavy analyses (analyzers/), run on their own cadence (analysis_cadence.h).
struct AnalysisSummary {
  bool available = false;
  std::string note;  // why not available, or what window it covers
  std::vector<analyzers::Finding> findings;  // highest impact first
  std::optional<int> straggler;
  std::vector<analyzers::CollectiveStatsRow> collective_rows;
  int64_t computed_ns = 0;  // how long the last run of the analyses took
};

struct ViewModel {
  std::string trace_path;
  std::string run_id;
  std::string status = "running";  // runs.status
  std::string command;
  int world_size = 0;
  bool live = false;           // a writer holds the trace
  int64_t start_ns = 0;        // runs.start_ns
  int64_t end_ns = 0;          // latest time the trace shows (run end, or latest event)
  int64_t elapsed_ns = 0;
  std::optional<int64_t> step;  // latest step every rank has completed
  std::optional<double> tokens_per_s;
  int64_t data_loss_events = 0;  // stat rows of severity data_loss/error, summed
  std::vector<RankStatus> ranks;  // ascending
  std::deque<MatchedCollective> collectives;  // newest last, at most kMaxRecentCollectives
  std::map<int, RankMemory> memory;
  std::map<int, std::deque<TimelineSlice>> slices;  // per rank, arrival order, bounded
  std::map<int, std::deque<StepMark>> steps;        // per rank, ascending, bounded
  AnalysisSummary analysis;

  static constexpr size_t kMaxRecentCollectives = 256;
  static constexpr size_t kMaxMemoryPoints = 2048;
  static constexpr size_t kMaxSlicesPerRank = 100'000;
  static constexpr size_t kMaxStepsPerRank = 4096;
};

// `partrain top --json`: the run, the ranks, recent collectives, memory now/peak/estimate and the
// findings; times in ms (`_ms`), sizes in bytes (`_bytes`), absent values null.
nlohmann::json view_model_json(const ViewModel& model);

}  // namespace partrain::tui
