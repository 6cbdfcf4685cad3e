// analyze_gpu_timeline: per rank, its CUDA streams' slices in order of start (the reader merges
// the streams, each walked along the slice_track_ts index) are added to four running unions: all,
// compute, comm, and compute ∪ comm (the overlap follows by inclusion-exclusion). Nothing but the
// open interval of each is held.
#include "analyzers/gpu_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "analyzers/activity.h"
#include "analyzers/rank_breakdown.h"
#include "core/number_format.h"
#include "profiler/trace_reader/kernel_reads.h"
#include "profiler/trace_reader/slice_reads.h"

namespace partrain::analyzers {

GpuWork gpu_work_of(profiler::SliceCategory category, std::string_view name) {
  if (category != profiler::SliceCategory::kKernel) return GpuWork::kOther;
  // The rank breakdown's communication on the GPU (activity.h), so both tables count the same.
  if (activity_of(category, name) == Activity::kComm) return GpuWork::kComm;
  if (name.find("Memcpy") != std::string_view::npos || name.starts_with("Memset") ||
      name.find("Sync") != std::string_view::npos) {
    return GpuWork::kOther;
  }
  return GpuWork::kCompute;
}

double GpuTimeline::pct_of_span(int64_t ns) const {
  return span_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(span_ns) : 0.0;
}

std::optional<double> GpuTimeline::overlap_pct() const {
  if (comm_ns <= 0) return std::nullopt;
  return 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(comm_ns);
}

namespace {

// What each name of a GPU slice counts as, looked up once per name: a trace has a few hundred
// kernel names and millions of launches.
class GpuWorkByName {
 public:
  explicit GpuWorkByName(const profiler::TraceReader& reader) : reader_(reader) {}
  StatusOr<GpuWork> of(const profiler::SliceSpan& slice) {
    if (slice.category != profiler::SliceCategory::kKernel) return GpuWork::kOther;
    auto found = work_.find(slice.name_id);
    if (found != work_.end()) return found->second;
    ASSIGN_OR_RETURN(const std::string_view name, reader_.string(slice.name_id));
    return work_.emplace(slice.name_id, gpu_work_of(slice.category, name)).first->second;
  }

 private:
  const profiler::TraceReader& reader_;
  std::unordered_map<int64_t, GpuWork> work_;
};

// One rank's GPU timeline: its CUDA streams' slices that start in its span, in order of start;
// nullopt when it ran nothing on the GPU there.
StatusOr<std::optional<GpuTimeline>> rank_timeline(const profiler::TraceReader& reader, int rank,
                                                   const RankSpan& span, GpuWorkByName& work) {
  using profiler::SliceCategory;
  ASSIGN_OR_RETURN(profiler::RankSliceCursor rows,
                   profiler::rank_slices(
                       reader, rank, span.start_ns, span.end_ns,
                       {SliceCategory::kKernel, SliceCategory::kMemcpy, SliceCategory::kMemset},
                       profiler::TrackKind::kCudaStream));
  IntervalUnion all, compute, comm, compute_or_comm;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  profiler::SliceSpan slice;
  while (rows.next(slice)) {
    if (slice.start_ns < span.start_ns) continue;  // it started before the span: not its work
    first = std::min(first, slice.start_ns);
    last = std::max(last, slice.end_ns);
    all.add(slice.start_ns, slice.end_ns);
    ASSIGN_OR_RETURN(const GpuWork kind, work.of(slice));
    switch (kind) {
      case GpuWork::kCompute:
        compute.add(slice.start_ns, slice.end_ns);
        break;
      case GpuWork::kComm:
        comm.add(slice.start_ns, slice.end_ns);
        break;
      case GpuWork::kOther:
        continue;
    }
    compute_or_comm.add(slice.start_ns, slice.end_ns);
  }
  RETURN_IF_ERROR(rows.status());
  if (first > last) return std::optional<GpuTimeline>();
  GpuTimeline out;
  out.rank = rank;
  out.span_ns = last - first;
  out.busy_ns = all.total_ns();
  out.compute_ns = compute.total_ns();
  out.comm_ns = comm.total_ns();
  out.overlap_ns = out.compute_ns + out.comm_ns - compute_or_comm.total_ns();
  return std::optional(out);
}

constexpr double kMs = 1e6;
double ms(int64_t ns) { return static_cast<double>(ns) / kMs; }

}  // namespace

StatusOr<GpuTimelineReport> analyze_gpu_timeline(const profiler::TraceReader& reader,
                                                 const AnalysisWindow& window) {
  GpuTimelineReport report;
  ASSIGN_OR_RETURN(const bool any, profiler::has_kernels(reader));
  if (!any) return report;  // a CPU trace: no query over its slices
  GpuWorkByName work(reader);
  for (int rank : window.ranks) {
    ASSIGN_OR_RETURN(std::optional<GpuTimeline> row,
                     rank_timeline(reader, rank, window.spans.at(rank), work));
    if (row) report.ranks.push_back(*row);
  }
  return report;
}

std::vector<Finding> gpu_timeline_findings(const GpuTimelineReport&) { return {}; }

std::string format_gpu_timeline(const GpuTimelineReport& report, const RankRowOptions& rows) {
  if (report.ranks.empty()) return "";
  auto cell = [](const GpuTimeline& row, int64_t ns) {
    return fmt::format("{:>9} ms {:>6}", format_decimal(ms(ns), 2),
                       format_percent(row.pct_of_span(ns) / 100));
  };
  std::string out =
      "GPU time per rank (HTA's temporal breakdown: ms and % of the span from the rank's first "
      "GPU activity to its last; comm = NCCL kernels)\n";
  out += fmt::format("{:>4}  {:>12}  {:>18}  {:>18}  {:>18}  {:>12}  {:>14}\n", "rank", "span",
                     "compute", "non-compute", "idle", "comm", "comm overlap");
  std::vector<int> ranks;
  std::vector<std::vector<double>> figures;
  for (const GpuTimeline& row : report.ranks) {
    ranks.push_back(row.rank);
    figures.push_back({static_cast<double>(row.span_ns), static_cast<double>(row.compute_ns),
                       static_cast<double>(row.non_compute_ns()),
                       static_cast<double>(row.idle_ns()), static_cast<double>(row.comm_ns),
                       static_cast<double>(row.overlap_ns)});
  }
  std::string left_out;
  for (size_t i : rank_rows_to_print(ranks, figures, rows, left_out)) {
    const GpuTimeline& row = report.ranks[i];
    const auto overlap = row.overlap_pct();
    out += fmt::format("{:>4}  {:>9} ms  {}  {}  {}  {:>9} ms  {:>14}\n", row.rank,
                       format_decimal(ms(row.span_ns), 2), cell(row, row.compute_ns),
                       cell(row, row.non_compute_ns()), cell(row, row.idle_ns()),
                       format_decimal(ms(row.comm_ns), 2),
                       overlap ? format_percent(*overlap / 100) : std::string("-"));
  }
  return out + left_out;
}

nlohmann::json gpu_timeline_json(const GpuTimelineReport& report) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const GpuTimeline& row : report.ranks) {
    const auto overlap = row.overlap_pct();
    ranks.push_back({{"rank", row.rank},
                     {"span_ms", ms(row.span_ns)},
                     {"compute_ms", ms(row.compute_ns)},
                     {"compute_pct", row.pct_of_span(row.compute_ns)},
                     {"non_compute_ms", ms(row.non_compute_ns())},
                     {"non_compute_pct", row.pct_of_span(row.non_compute_ns())},
                     {"idle_ms", ms(row.idle_ns())},
                     {"idle_pct", row.pct_of_span(row.idle_ns())},
                     {"comm_ms", ms(row.comm_ns)},
                     {"overlap_ms", ms(row.overlap_ns)},
                     {"overlap_pct", overlap ? nlohmann::json(*overlap) : nlohmann::json()}});
  }
  return ranks;
}

}  // namespace partrain::analyzers
