// analyze_temporal_breakdown: per rank, the slices of the window's kinds come in order of start
// (the reader merges the rank's tracks, each walked along the slice_track_ts index) and are
// added to BusyTime's running unions, so nothing but one row per track is ever held.
#include "analyzers/temporal_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string_view>
#include <utility>

#include "core/number_format.h"
#include "core/step_quantiles.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

// Which ranks a share is the mean of: "mean of 4 ranks", "1 rank" for a trace of one.
std::string over_ranks(const TemporalBreakdown& report) {
  return report.ranks.size() == 1 ? "1 rank" : fmt::format("mean of {} ranks", report.ranks.size());
}

using profiler::TraceReader;

// Feeds the rank's slices, clipped to its span, to the unions in order of start time.
Status sweep_rank(const TraceReader& reader, const RankSpan& span, ActivityByName& activities,
                  RankBreakdown& out) {
  ASSIGN_OR_RETURN(profiler::RankSliceCursor slices,
                   profiler::rank_slices(reader, out.rank, span.start_ns, span.end_ns,
                                         breakdown_categories()));
  BusyTime busy(span.start_ns, span.end_ns);
  profiler::SliceSpan slice;
  while (slices.next(slice)) {
    ASSIGN_OR_RETURN(const Activity activity, activities.of(slice.category, slice.name_id));
    busy.add(slice.start_ns, slice.end_ns, activity, on_gpu(slice.category));
  }
  RETURN_IF_ERROR(slices.status());
  busy.fill(out);
  return Status::ok();
}

StatusOr<StepTimes> step_times(const TraceReader& reader, int rank, const AnalysisWindow& window) {
  StepTimes times;
  if (!window.has_steps) return times;
  ASSIGN_OR_RETURN(profiler::StepCursor steps,
                   profiler::rank_steps(reader, rank, window.first_step, window.last_step));
  std::vector<double> durations;
  profiler::StepRow step;
  while (steps.next(step)) durations.push_back(static_cast<double>(step.dur_ns));
  RETURN_IF_ERROR(steps.status());
  if (durations.empty()) return times;
  const auto n = static_cast<double>(durations.size());
  times.count = static_cast<int64_t>(durations.size());
  times.median_ns = median(durations);
  times.p90_ns = nearest_rank_quantile(durations, 0.9);
  times.mean_ns = std::accumulate(durations.begin(), durations.end(), 0.0) / n;
  return times;
}

}  // namespace

StatusOr<TemporalBreakdown> analyze_temporal_breakdown(const TraceReader& reader,
                                                       const AnalysisWindow& window) {
  TemporalBreakdown report;
  report.has_steps = window.has_steps;
  ActivityByName activities(reader);
  for (int rank : window.ranks) {
    const RankSpan& span = window.spans.at(rank);
    RankBreakdown row;
    row.rank = rank;
    row.steps = span.steps;
    RETURN_IF_ERROR(sweep_rank(reader, span, activities, row));
    ASSIGN_OR_RETURN(row.step_times, step_times(reader, rank, window));
    report.ranks.push_back(row);
  }
  return report;
}

namespace {

constexpr double kMs = 1e6;
double ms(double ns) { return ns / kMs; }

// Mean over ranks of a share of each rank's window, and the rank where it is largest.
template <typename ShareOf>
std::pair<double, const RankBreakdown*> mean_and_worst(const TemporalBreakdown& report,
                                                        ShareOf share_of) {
  double sum = 0;
  const RankBreakdown* worst = nullptr;
  for (const RankBreakdown& row : report.ranks) {
    sum += share_of(row);
    if (worst == nullptr || share_of(row) > share_of(*worst)) worst = &row;
  }
  return {report.ranks.empty() ? 0.0 : sum / static_cast<double>(report.ranks.size()), worst};
}

// "8.31 ms per step" with steps, "83.1 ms" without.
std::string time_text(const RankBreakdown& row, int64_t ns) {
  if (auto per_step = row.ms_per_step(ns)) return format_decimal(*per_step, 2) + " ms per step";
  return format_decimal(ms(static_cast<double>(ns)), 2) + " ms";
}

std::optional<Finding> exposed_communication(const TemporalBreakdown& report) {
  int64_t comm = 0, overlap = 0;
  for (const RankBreakdown& row : report.ranks) {
    comm += row.comm_ns;
    overlap += row.overlap_ns;
  }
  auto [comm_share, unused] = mean_and_worst(
      report, [](const RankBreakdown& r) { return r.pct_of_window(r.comm_ns) / 100; });
  auto [exposed, worst] = mean_and_worst(
      report, [](const RankBreakdown& r) { return r.pct_of_window(r.exposed_comm_ns()) / 100; });
  const double overlap_share =
      comm > 0 ? static_cast<double>(overlap) / static_cast<double>(comm) : 1.0;
  // Communication that hides under compute costs nothing; what is left exposed is the cost.
  const Severity severity = exposed_communication_severity(exposed);
  if (severity == Severity::kInfo) return std::nullopt;
  Finding finding;
  finding.kind = "exposed_communication";
  finding.severity = severity;
  finding.rank = worst->rank;
  finding.impact = exposed;
  finding.evidence = fmt::format(
      "communication takes {} of the window ({}) and {} of it overlaps compute: "
      "{} of the time is exposed communication; most on rank {}: {} ({})",
      format_percent(comm_share), over_ranks(report), format_percent(overlap_share),
      format_percent(exposed), worst->rank,
      format_percent(worst->pct_of_window(worst->exposed_comm_ns()) / 100),
      time_text(*worst, worst->exposed_comm_ns()));
  finding.advice =
      "start gradient all-reduces during backward (smaller DDP buckets) so they hide under "
      "compute; shrink tensor-parallel traffic (lower tp, keep tp inside a node); or give each "
      "rank more work per collective (larger micro-batch, more gradient accumulation)";
  return finding;
}

std::optional<Finding> high_idle(const TemporalBreakdown& report) {
  auto [idle, worst] = mean_and_worst(
      report, [](const RankBreakdown& r) { return r.pct_of_window(r.idle_ns()) / 100; });
  if (worst == nullptr || idle < 0.10) return std::nullopt;
  auto [in_phases, unused] = mean_and_worst(
      report, [](const RankBreakdown& r) { return r.pct_of_window(r.idle_in_phases_ns) / 100; });
  Finding finding;
  finding.kind = "idle";
  finding.severity = idle >= 0.30 ? Severity::kCritical : Severity::kWarning;
  finding.rank = worst->rank;
  finding.impact = idle;
  finding.evidence = fmt::format(
      "ranks are idle (no compute, communication or memcpy recorded) {} of the window ({}); "
      "most on rank {}: {} ({}); {} of the window is inside phase slices (forward, "
      "backward, optimizer...) and {} outside any",
      format_percent(idle), over_ranks(report), worst->rank,
      format_percent(worst->pct_of_window(worst->idle_ns()) / 100),
      time_text(*worst, worst->idle_ns()), format_percent(in_phases),
      format_percent(idle - in_phases));
  finding.advice =
      in_phases >= idle / 2
          ? "most of it is inside phases: work recorded only as a phase (such as the optimizer "
            "update on the host) or waits inside it; record that work as compute slices to see "
            "it, or make it cheaper (a fused or sharded optimizer, fewer host synchronisations)"
          : "idle time between phases is input loading, host overhead (Python, kernel "
            "launches), synchronisation or waiting on another rank: see the straggler and "
            "pipeline findings, prefetch input data, and trace the host side of the gaps";
  return finding;
}

// Compute not overlapped by communication: a blocking collective called inside a compute slice
// (tensor-parallel all-reduces on the CPU backends) is waiting, not work, and would make the
// rank that waits longest look like the slowest.
double compute_per_step(const RankBreakdown& row) {
  const int64_t ns = row.compute_only_ns();
  return row.ms_per_step(ns).value_or(ms(static_cast<double>(ns)));
}

std::optional<Finding> compute_imbalance(const TemporalBreakdown& report) {
  if (report.ranks.size() < 2) return std::nullopt;
  std::vector<const RankBreakdown*> rows;
  for (const RankBreakdown& row : report.ranks) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](const RankBreakdown* a, const RankBreakdown* b) {
    return compute_per_step(*a) < compute_per_step(*b);
  });
  const RankBreakdown& most = *rows.back();
  const double high = compute_per_step(most), low = compute_per_step(*rows.front());
  // The mean of the two middle ranks for an even count (docs/analysis.md's median).
  const size_t middle = rows.size() / 2;
  const double median =
      rows.size() % 2 == 1
          ? compute_per_step(*rows[middle])
          : (compute_per_step(*rows[middle - 1]) + compute_per_step(*rows[middle])) / 2;
  const double window =
      most.ms_per_step(most.window_ns).value_or(ms(static_cast<double>(most.window_ns)));
  const double impact = window > 0 ? (high - median) / window : 0;
  // A spread that costs under 2% of a step is noise, however large in relative terms.
  if (high <= 0 || (high - low) / high < 0.10 || impact < 0.02) return std::nullopt;
  Finding finding;
  finding.kind = "compute_imbalance";
  finding.severity = impact >= 0.10 ? Severity::kCritical : Severity::kWarning;
  finding.rank = most.rank;
  finding.impact = impact;
  const char* unit = most.steps > 0 ? " per step" : "";
  finding.evidence = fmt::format(
      "rank {} computes {:.2f} ms{}, the median rank {:.2f} ms and the least (rank {}) {:.2f} ms "
      "(compute not overlapped by communication): a {:.1f}% spread the other ranks wait out at "
      "each collective",
      most.rank, high, unit, median, rows.front()->rank, low, 100 * (high - low) / high);
  finding.advice =
      "even out the work per rank: layers per pipeline stage, sequence lengths or samples per "
      "rank; check the slow rank's device and host for other load (a shared CPU or GPU, "
      "thermal throttling)";
  return finding;
}

}  // namespace

Severity exposed_communication_severity(double share) {
  return share >= 0.25 ? Severity::kCritical : share >= 0.10 ? Severity::kWarning : Severity::kInfo;
}

bool compute_recorded(const TemporalBreakdown& report) {
  return std::any_of(report.ranks.begin(), report.ranks.end(),
                     [](const RankBreakdown& row) { return row.compute_ns > 0; });
}

namespace {

// For a report in which no rank recorded compute, but communication or steps were: a foreign
// program's host work (a PyTorch job on the CPU, whose collectives and steps partrain records
// but not its ops) or a GPU program traced without its kernels. What is not communication is
// then unknown, not idle.
std::optional<Finding> unrecorded_compute(const TemporalBreakdown& report) {
  if (report.ranks.empty()) return std::nullopt;
  const bool communicated = std::any_of(report.ranks.begin(), report.ranks.end(),
                                        [](const RankBreakdown& row) { return row.comm_ns > 0; });
  if (!communicated && !report.has_steps) return std::nullopt;
  auto [idle, unused] = mean_and_worst(
      report, [](const RankBreakdown& r) { return r.pct_of_window(r.idle_ns()) / 100; });
  Finding finding;
  finding.kind = "compute_unrecorded";
  finding.severity = Severity::kInfo;
  finding.impact = 0;
  finding.evidence = fmt::format(
      "no compute was recorded on any of the {} ranks: the {:.1f}% of the window outside "
      "communication and memcpy (mean of the ranks) is work partrain could not see, not idle "
      "time, so no idle, exposed-communication or compute-imbalance finding is made",
      report.ranks.size(), 100 * idle);
  finding.advice =
      "partrain records a PyTorch program's collectives and steps, and its GPU kernels through "
      "CUPTI, but not the host's own work: run it on the GPU under partrain to see its kernels, "
      "or profile it with torch.profiler and bring the traces in with `partrain import`; the "
      "communication times, step times and stragglers stand as measured";
  return finding;
}

}  // namespace

std::vector<Finding> temporal_findings(const TemporalBreakdown& report) {
  std::vector<Finding> findings;
  if (!compute_recorded(report)) {
    // Idle, exposure and imbalance are judged against compute; without any, they would be made
    // up (a DDP job's all-reduces hide under a backward nobody recorded).
    if (auto finding = unrecorded_compute(report)) findings.push_back(std::move(*finding));
    return findings;
  }
  for (auto finding :
       {exposed_communication(report), high_idle(report), compute_imbalance(report)}) {
    if (finding) findings.push_back(std::move(*finding));
  }
  return findings;
}

namespace {

// "  8.31 ms  41.2%": ms per step (total ms without steps) and share of the window.
std::string cell(const RankBreakdown& row, int64_t ns) {
  const double value = row.ms_per_step(ns).value_or(ms(static_cast<double>(ns)));
  return fmt::format("{:>9} ms {:>6}", format_decimal(value, 2),
                     format_percent(row.pct_of_window(ns) / 100));
}

std::string step_cell(const RankBreakdown& row, double ns) {
  if (row.step_times.count == 0) return fmt::format("{:>11}", "-");
  return fmt::format("{:>8} ms", format_decimal(ms(ns), 2));
}

}  // namespace

std::string format_temporal_breakdown(const TemporalBreakdown& report, const RankRowOptions& rows) {
  // Without any compute recorded, what is not communication is unknown: compute, its overlap,
  // the exposed communication and the idle time read '-', not 0 ms and 75% idle.
  const bool known = compute_recorded(report);
  std::string out = fmt::format(
      "Time per rank ({}, % of the rank's window; comm overlapping compute counts in both; "
      "overlap: % of comm under compute)\n",
      report.has_steps ? "ms per step" : "ms");
  out += fmt::format("{:>4}  {:>11}  {:>11}  {:>18}  {:>18}  {:>7}  {:>18}  {:>18}  {:>18}\n",
                     "rank", "step median", "step p90", "compute", "comm", "overlap",
                     "exposed comm", "memcpy", "idle");
  const std::string unknown = fmt::format("{:>18}", "-");
  std::vector<int> ranks;
  std::vector<std::vector<double>> figures;
  for (const RankBreakdown& row : report.ranks) {
    ranks.push_back(row.rank);
    figures.push_back({row.step_times.median_ns, row.step_times.p90_ns,
                       static_cast<double>(row.compute_ns), static_cast<double>(row.comm_ns),
                       static_cast<double>(row.exposed_comm_ns()),
                       static_cast<double>(row.memcpy_ns), static_cast<double>(row.idle_ns())});
  }
  std::string left_out;
  for (size_t i : rank_rows_to_print(ranks, figures, rows, left_out)) {
    const RankBreakdown& row = report.ranks[i];
    const auto overlap = known ? row.overlap_pct() : std::nullopt;
    out +=
        fmt::format("{:>4}  {}  {}  {}  {}  {:>7}  {}  {}  {}\n", row.rank,
                    step_cell(row, row.step_times.median_ns), step_cell(row, row.step_times.p90_ns),
                    known ? cell(row, row.compute_ns) : unknown, cell(row, row.comm_ns),
                    overlap ? format_percent(*overlap / 100) : std::string("-"),
                    known ? cell(row, row.exposed_comm_ns()) : unknown, cell(row, row.memcpy_ns),
                    known ? cell(row, row.idle_ns()) : unknown);
  }
  out += left_out;
  if (!known && !report.ranks.empty()) {
    out +=
        "  compute: none recorded (a program's host work partrain does not see: see the "
        "compute_unrecorded finding); compute, exposed comm and idle are unknown\n";
  }
  return out;
}

namespace {

nlohmann::json optional_number(std::optional<double> value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// `compute_known`: false when no rank recorded compute, which leaves compute, overlap, exposed
// communication and idle unknown (null).
nlohmann::json rank_json(const RankBreakdown& row, bool compute_known) {
  nlohmann::json out = {{"rank", row.rank}, {"window_ms", ms(static_cast<double>(row.window_ns))},
                        {"steps", row.steps}};
  const std::pair<const char*, int64_t> parts[] = {
      {"compute", row.compute_ns},         {"comm", row.comm_ns},
      {"memcpy", row.memcpy_ns},           {"idle", row.idle_ns()},
      {"overlap", row.overlap_ns},         {"exposed_comm", row.exposed_comm_ns()},
      {"exposed_memcpy", row.exposed_memcpy_ns()}, {"idle_in_phases", row.idle_in_phases_ns}};
  for (const auto& [name, ns] : parts) {
    const std::string_view part = name;
    if (!compute_known && part != "comm" && part != "memcpy") {
      out[fmt::format("{}_ms", name)] = nullptr;
      out[fmt::format("{}_ms_per_step", name)] = nullptr;
      if (part != "overlap") out[fmt::format("{}_pct", name)] = nullptr;
      continue;
    }
    out[fmt::format("{}_ms", name)] = ms(static_cast<double>(ns));
    out[fmt::format("{}_ms_per_step", name)] = optional_number(row.ms_per_step(ns));
    if (std::string_view(name) != "overlap") {
      out[fmt::format("{}_pct", name)] = row.pct_of_window(ns);
    }
  }
  out["overlap_pct"] = compute_known ? optional_number(row.overlap_pct()) : nullptr;
  out["compute_recorded"] = compute_known;
  const bool timed = row.step_times.count > 0;
  auto step_ms = [timed](double ns) {
    return timed ? nlohmann::json(ms(ns)) : nlohmann::json(nullptr);
  };
  out["step_ms_median"] = step_ms(row.step_times.median_ns);
  out["step_ms_p90"] = step_ms(row.step_times.p90_ns);
  out["step_ms_mean"] = step_ms(row.step_times.mean_ns);
  return out;
}

}  // namespace

nlohmann::json temporal_breakdown_json(const TemporalBreakdown& report) {
  nlohmann::json ranks = nlohmann::json::array();
  const bool known = compute_recorded(report);
  for (const RankBreakdown& row : report.ranks) ranks.push_back(rank_json(row, known));
  return ranks;
}

}  // namespace partrain::analyzers
