#include "analyzers/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "analyzers/bandwidth.h"
#include "analyzers/layout_search.h"
#include "analyzers/sample_quantiles.h"
#include "analyzers/temporal_breakdown.h"
#include "analyzers/workload_run_config.h"
#include "profiler/trace_reader/collective_reads.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

using profiler::TraceReader;

// The rows of the window's steps; a trace without steps is one window (every row, the ones with
// no step too).
profiler::StepFilter window_steps(const AnalysisWindow& window) {
  return {window.first_step, window.last_step, !window.has_steps};
}

// The busiest rank's compute and optimizer time per step over the window. Compute is the
// temporal breakdown's compute not overlapped by communication (a blocking collective inside a
// compute slice is waiting, not work), less the optimizer's `adamw` slices.
struct MeasuredPhases {
  double compute_s = 0;
  double optimizer_s = 0;
};

StatusOr<MeasuredPhases> measure_phases(const TraceReader& reader, const AnalysisWindow& window) {
  MeasuredPhases measured;
  if (!window.has_steps) return measured;
  ASSIGN_OR_RETURN(TemporalBreakdown breakdown, analyze_temporal_breakdown(reader, window));
  using TimeByRank = std::map<int, int64_t>;
  ASSIGN_OR_RETURN(TimeByRank optimizer_ns,
                   profiler::compute_time_by_rank(reader, "adamw", window_steps(window)));
  for (const RankBreakdown& rank : breakdown.ranks) {
    if (rank.steps == 0) continue;
    const auto steps = static_cast<double>(rank.steps);
    const int64_t optimizer = optimizer_ns[rank.rank];
    measured.compute_s = std::max(
        measured.compute_s, static_cast<double>(rank.compute_only_ns() - optimizer) * 1e-9 / steps);
    measured.optimizer_s =
        std::max(measured.optimizer_s, static_cast<double>(optimizer) * 1e-9 / steps);
  }
  return measured;
}

// Below this many bus bytes a transfer is all latency: a single such size says nothing of
// bandwidth (a 4-byte loss all-reduce taking 3 ms would read as 1e-6 GB/s).
constexpr double kBandwidthBytes = 64 * 1024;

// One matched collective per (comm_id, seq), timed from its last member's arrival to its end
// (the shortest member's duration): the waiting before it is the schedule's, a pipeline stage's
// for its neighbour or a rank's for a straggler, which the bubble term models and no link has.
StatusOr<std::vector<CollectiveFit>> fit_collectives(const TraceReader& reader,
                                                     const AnalysisWindow& window, LinkLevel level,
                                                     std::vector<std::string>& notes) {
  ASSIGN_OR_RETURN(const std::vector<profiler::MatchedOpTiming> timings,
                   profiler::matched_op_timings(reader, window_steps(window)));
  // Per op and group size (latency and busbw both depend on the group, so groups are fitted
  // apart), per message size, the durations.
  std::map<std::pair<CostedOp, int>, std::map<double, SampleQuantiles>> samples;
  for (const profiler::MatchedOpTiming& timing : timings) {
    auto op = costed_op_from_trace(timing.op);
    // A collective over one rank (a world of one) moves nothing: no link to measure. Send/recv
    // rows name their pair. Under a nanosecond is no time.
    const bool p2p = op == CostedOp::kSendRecv;
    const int group = p2p ? 2 : timing.group_size;
    if (!op || group < 2 || static_cast<int64_t>(timing.time_ns) <= 0) continue;
    samples[{*op, group}][timing.bytes].add(timing.time_ns * 1e-9);
  }
  std::vector<CollectiveFit> fits;
  for (const auto& [key, by_size] : samples) {
    const auto [op, group] = key;
    CollectiveFit fit;
    fit.op = op;
    fit.level = level;
    fit.group_size = group;
    std::vector<std::pair<double, double>> points;  // (S x factor, median seconds)
    double best_busbw = 0;
    const double factor = busbw_factor(costed_op_name(op), group).value_or(1.0);
    for (const auto& [bytes, times] : by_size) {
      const double x = bytes * factor;
      const double t = times.median();
      points.emplace_back(x, t);
      fit.samples += times.count();
      best_busbw = std::max(best_busbw, x / t);
    }
    fit.sizes = static_cast<int>(points.size());
    const auto line = fit_line(points);
    const double largest = by_size.rbegin()->first;  // by_size is ordered by message size
    if (!line && largest * factor < kBandwidthBytes) {
      notes.push_back(fmt::format(
          "{} over {} ranks: only {} B messages, too small to measure bandwidth: not calibrated",
          costed_op_name(op), group, largest));
      continue;
    }
    if (line && line->intercept >= 0) {
      fit.link.bandwidth = 1 / line->slope;
      fit.link.latency_s = line->intercept / std::max(1, latency_steps(op, group));
    } else {
      fit.link.bandwidth = best_busbw;  // one size, or latency hidden in noise: bandwidth only
      fit.link.latency_s = 0;
    }
    double squares = 0;
    for (const auto& [x, t] : points) {
      const double fitted = latency_steps(op, group) * fit.link.latency_s + x / fit.link.bandwidth;
      squares += (fitted - t) * (fitted - t) / (t * t);
    }
    fit.rms_error = std::sqrt(squares / static_cast<double>(points.size()));
    fits.push_back(fit);
  }
  return fits;
}

struct RankPlacement {
  int64_t hosts = 0;
  int64_t most_ranks_on_a_host = 0;
};

// Hosts, and the most ranks one of them holds (ranks whose host is not recorded count as one).
StatusOr<RankPlacement> rank_placement(const TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> ranks, reader.ranks());
  std::map<std::string, int64_t> per_host;
  for (const profiler::RankRow& rank : ranks) ++per_host[rank.host];
  RankPlacement placement{static_cast<int64_t>(per_host.size()), 0};
  for (const auto& [host, count] : per_host) {
    placement.most_ranks_on_a_host = std::max(placement.most_ranks_on_a_host, count);
  }
  return placement;
}

// The median over the window's steps of the slowest rank's step: what a step of the run took.
StatusOr<double> measure_step(const TraceReader& reader, const AnalysisWindow& window) {
  ASSIGN_OR_RETURN(profiler::StepCursor rows,
                   profiler::window_steps(reader, window.first_step, window.last_step));
  std::map<int64_t, int64_t> slowest;  // step -> its slowest rank's duration
  profiler::StepRow row;
  while (rows.next(row)) slowest[row.step] = std::max(slowest[row.step], row.dur_ns);
  RETURN_IF_ERROR(rows.status());
  SampleQuantiles steps;
  for (const auto& [step, dur_ns] : slowest) steps.add(static_cast<double>(dur_ns) * 1e-9);
  return steps.median();
}

// `sharing`: how much slower the traced ranks computed because they shared devices (ranks on a
// host over the machines' devices); the scales are for one rank alone on its device.
Status calibrate_compute(const TraceReader& reader, const WorkloadRunConfig& run,
                         const CostModel& uncalibrated, const AnalysisWindow& window,
                         double sharing, const RankPlacement& placement, Calibration& out) {
  ASSIGN_OR_RETURN(memory::EstimateInput input, workload_estimate_input(run));
  ASSIGN_OR_RETURN(memory::MemoryEstimate estimate, memory::estimate_memory(input));
  CostModel own = uncalibrated;
  own.model = input.model;
  own.recipe = input.recipe;
  const StepCost predicted = step_cost(own, estimate);
  out.run_layout = layout_label(input.layout);
  ASSIGN_OR_RETURN(MeasuredPhases measured, measure_phases(reader, window));
  if (measured.compute_s > 0 && predicted.compute_s > 0) {
    out.measured_compute_s = measured.compute_s;
    out.predicted_compute_s = predicted.compute_s * sharing;
    out.compute_scale = measured.compute_s / out.predicted_compute_s;
    out.compute_tp = input.layout.tp;
  } else {
    out.notes.push_back("no compute slices after the warm-up steps: compute not calibrated");
  }
  if (measured.optimizer_s > 0 && predicted.optimizer_s > 0) {
    out.measured_optimizer_s = measured.optimizer_s;
    out.predicted_optimizer_s = predicted.optimizer_s * sharing;
    out.optimizer_scale = measured.optimizer_s / out.predicted_optimizer_s;
  }
  if (!window.has_steps) return Status::ok();
  ASSIGN_OR_RETURN(double step_s, measure_step(reader, window));
  if (step_s <= 0) return Status::ok();
  // The run's own machines: how many of its ranks shared a host (the user's figure when the
  // trace has no rank rows); the devices per node are the user's (a trace records no cores).
  Machines run_machines = uncalibrated.comm.machines();
  if (placement.most_ranks_on_a_host > 0) {
    run_machines.gpus_per_node = static_cast<int>(placement.most_ranks_on_a_host);
  }
  out.own_run = Calibration::OwnRun{input.model, input.recipe, std::move(estimate),
                                    std::move(run_machines), step_s};
  return Status::ok();
}

Status nothing_to_calibrate(const std::string& source, std::string_view why) {
  return Status(
      StatusCode::kUnreadable,
      fmt::format("{}: nothing to calibrate from ({}); trace a run with more steps", source, why));
}

}  // namespace

std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& points) {
  const double n = static_cast<double>(points.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double denominator = n * sxx - sx * sx;
  if (points.size() < 2 || denominator <= 1e-12 * n * sxx) return std::nullopt;
  LineFit fit;
  fit.slope = (n * sxy - sx * sy) / denominator;
  fit.intercept = (sy - fit.slope * sx) / n;
  if (fit.slope <= 0) return std::nullopt;
  return fit;
}

StatusOr<Calibration> measure_calibration(const TraceReader& reader, const std::string& source,
                                          const CostModel& uncalibrated, int skip_steps) {
  Calibration out;
  out.source = source;
  ASSIGN_OR_RETURN(std::optional<WorkloadRunConfig> run, read_workload_run_config(reader));
  ASSIGN_OR_RETURN(RankPlacement placement, rank_placement(reader));
  WindowOptions options;
  options.skip_steps = skip_steps;
  StatusOr<AnalysisWindow> chosen = choose_window(reader, options);
  if (!chosen.is_ok()) return nothing_to_calibrate(source, chosen.status().message());
  const AnalysisWindow& window = *chosen;
  if (run) {
    const double sharing = sharing_factor(placement.most_ranks_on_a_host,
                                          uncalibrated.comm.machines().devices_per_node);
    RETURN_IF_ERROR(calibrate_compute(reader, *run, uncalibrated, window, sharing, placement, out));
  } else {
    out.notes.push_back(
        "not a built-in workload's trace (no model in its run config): compute "
        "and optimizer speed not calibrated, collectives only");
  }
  const LinkLevel level = placement.hosts > 1 ? LinkLevel::kInterNode : LinkLevel::kIntraNode;
  ASSIGN_OR_RETURN(out.collectives, fit_collectives(reader, window, level, out.notes));
  if (!out.compute_scale && out.collectives.empty()) {
    return nothing_to_calibrate(
        source, fmt::format("no compute slices and no completed collectives after {} warm-up "
                            "step(s)",
                            skip_steps));
  }
  return out;
}

void apply_calibrations(std::vector<Calibration>& calibrations, CostModel& model) {
  std::map<int, std::pair<double, int>> compute_logs;  // tp -> (sum of log scales, runs)
  double optimizer_log = 0;
  int optimizers = 0;
  std::map<std::tuple<CostedOp, LinkLevel, int>, const CollectiveFit*> best;
  for (const Calibration& c : calibrations) {
    if (c.compute_scale) {
      auto& [log_sum, runs] = compute_logs[c.compute_tp];
      log_sum += std::log(*c.compute_scale);
      ++runs;
    }
    if (c.optimizer_scale) optimizer_log += std::log(*c.optimizer_scale), ++optimizers;
    for (const CollectiveFit& fit : c.collectives) {
      const CollectiveFit*& chosen = best[{fit.op, fit.level, fit.group_size}];
      if (chosen == nullptr || fit.samples > chosen->samples) chosen = &fit;
    }
  }
  for (const auto& [key, fit] : best) {
    model.comm.calibrate(fit->op, fit->level, fit->group_size, fit->link);
  }
  for (const auto& [tp, logs] : compute_logs) {
    model.compute_scale_by_tp[tp] = std::exp(logs.first / logs.second);
  }
  if (optimizers > 0) model.optimizer_bandwidth /= std::exp(optimizer_log / optimizers);

  for (Calibration& c : calibrations) {
    if (!c.own_run) continue;
    CostModel own = model;
    own.model = c.own_run->model;
    own.recipe = c.own_run->recipe;
    own.comm = model.comm.on_machines(c.own_run->machines);
    own.step_scale = 1;
    c.predicted_step_s = step_cost(own, c.own_run->estimate).step_s;
    if (c.predicted_step_s > 0) c.step_scale = c.own_run->measured_step_s / c.predicted_step_s;
  }
  if (const auto scale = combined_step_scale(calibrations)) model.step_scale *= *scale;
}

std::optional<double> combined_step_scale(const std::vector<Calibration>& calibrations) {
  double log_sum = 0;
  int runs = 0;
  for (const Calibration& c : calibrations) {
    if (c.step_scale) log_sum += std::log(*c.step_scale), ++runs;
  }
  if (runs == 0) return std::nullopt;
  return std::exp(log_sum / runs);
}

}  // namespace partrain::analyzers
