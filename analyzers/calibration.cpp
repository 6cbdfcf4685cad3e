#include "analyzers/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "analyzers/bandwidth.h"
#include "analyzers/layout_search.h"
#include "analyzers/sample_quantiles.h"
#include "analyzers/workload_run_config.h"

namespace partrain::analyzers {
namespace {

using profiler::SqliteStatement;

// The busiest rank's median per-step time in compute slices (the optimizer's apart, collectives
// nested inside compute taken out) and in the optimizer.
struct MeasuredPhases {
  double compute_s = 0;
  double optimizer_s = 0;
};

StatusOr<MeasuredPhases> measure_phases(const profiler::SqliteDb& db, int skip_steps) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, R"sql(
    SELECT c.rank, c.step, c.name = 'adamw',
           SUM(c.dur_ns) - coalesce(SUM((SELECT SUM(co.dur_ns) FROM collectives co
                                         WHERE co.rank = c.rank AND co.ts_ns >= c.ts_ns
                                           AND co.ts_ns < c.ts_ns + c.dur_ns)), 0)
    FROM slices c
    WHERE c.category = 'compute' AND c.step >= ?1
    GROUP BY c.rank, c.step, c.name = 'adamw')sql"));
  stmt.bind(1, int64_t{skip_steps});
  std::map<std::pair<int64_t, bool>, SampleQuantiles> per_rank;
  while (stmt.step() == SQLITE_ROW) {
    per_rank[{stmt.column_int(0), stmt.column_int(2) != 0}].add(stmt.column_double(3) * 1e-9);
  }
  MeasuredPhases measured;
  for (const auto& [key, samples] : per_rank) {
    const double median = samples.median();
    double& slot = key.second ? measured.optimizer_s : measured.compute_s;
    slot = std::max(slot, median);
  }
  return measured;
}

// One matched collective per (comm_id, seq): for collectives the average member's duration
// (what the collective costs a rank, the arrival skew the machine produces included); for
// send/recv the faster side's (the receiver's wait for its sender is the pipeline schedule's,
// which the bubble term models).
StatusOr<std::vector<CollectiveFit>> fit_collectives(const profiler::SqliteDb& db, int skip_steps,
                                                     LinkLevel level) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, R"sql(
    SELECT MIN(op), MAX(group_size), MIN(bytes),
           CASE WHEN MIN(op) IN ('send', 'recv') THEN MIN(dur_ns) ELSE AVG(dur_ns) END
    FROM collectives
    WHERE state = 'completed' AND coalesce(step, 0) >= ?1 AND bytes > 0
    GROUP BY comm_id, seq
    HAVING COUNT(DISTINCT bytes) = 1 AND COUNT(DISTINCT op) <= 2)sql"));
  stmt.bind(1, int64_t{skip_steps});
  std::map<std::tuple<CostedOp, int, double>, SampleQuantiles> samples;
  while (stmt.step() == SQLITE_ROW) {
    auto op = costed_op_from_trace(stmt.column_text(0));
    const int group = std::max<int>(2, static_cast<int>(stmt.column_int(1)));
    if (!op || stmt.column_int(3) <= 0) continue;
    samples[{*op, group, stmt.column_double(2)}].add(stmt.column_double(3) * 1e-9);
  }
  // One fit per op and group size: latency and busbw both depend on the group, so sizes of
  // different groups are not mixed.
  std::map<std::pair<CostedOp, int>, std::vector<const std::pair<const std::tuple<CostedOp, int, double>, SampleQuantiles>*>> groups;
  for (const auto& entry : samples) {
    groups[{std::get<0>(entry.first), std::get<1>(entry.first)}].push_back(&entry);
  }
  std::vector<CollectiveFit> fits;
  for (const auto& [key, entries] : groups) {
    const auto [op, group] = key;
    CollectiveFit fit;
    fit.op = op;
    fit.level = level;
    fit.group_size = group;
    std::vector<std::pair<double, double>> points;  // (S x factor, median seconds)
    double best_busbw = 0;
    const double factor = busbw_factor(costed_op_name(op), group).value_or(1.0);
    for (const auto* entry : entries) {
      const double x = std::get<2>(entry->first) * factor;
      const double t = entry->second.median();
      points.emplace_back(x, t);
      fit.samples += entry->second.count();
      best_busbw = std::max(best_busbw, x / t);
    }
    fit.sizes = static_cast<int>(points.size());
    const auto line = fit_line(points);
    if (line && line->intercept >= 0) {
      fit.link.bandwidth = 1 / line->slope;
      fit.link.latency_s = line->intercept / std::max(1, latency_steps(op, group));
    } else {
      fit.link.bandwidth = best_busbw;  // one size, or latency hidden in noise: bandwidth only
      fit.link.latency_s = 0;
    }
    fits.push_back(fit);
  }
  return fits;
}

struct RankPlacement {
  int64_t hosts = 0;
  int64_t most_ranks_on_a_host = 0;
};

StatusOr<RankPlacement> rank_placement(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, R"sql(
    SELECT COUNT(*), coalesce(MAX(n), 0)
    FROM (SELECT host, COUNT(*) AS n FROM ranks GROUP BY host))sql"));
  if (stmt.step() != SQLITE_ROW) return RankPlacement{};
  return RankPlacement{stmt.column_int(0), stmt.column_int(1)};
}

// `sharing`: how much slower the traced ranks computed because they shared devices (ranks on a
// host over the machines' devices); the scales are for one rank alone on its device.
Status calibrate_compute(const profiler::SqliteDb& db, const WorkloadRunConfig& run,
                         const CostModel& uncalibrated, int skip_steps, double sharing,
                         Calibration& out) {
  ASSIGN_OR_RETURN(memory::EstimateInput input, workload_estimate_input(run));
  ASSIGN_OR_RETURN(memory::MemoryEstimate estimate, memory::estimate_memory(input));
  CostModel own = uncalibrated;
  own.model = input.model;
  own.recipe = input.recipe;
  const StepCost predicted = step_cost(own, estimate);
  out.run_layout = layout_label(input.layout);
  ASSIGN_OR_RETURN(MeasuredPhases measured, measure_phases(db, skip_steps));
  if (measured.compute_s > 0 && predicted.compute_s > 0) {
    out.measured_compute_s = measured.compute_s;
    out.predicted_compute_s = predicted.compute_s * sharing;
    out.compute_scale = measured.compute_s / out.predicted_compute_s;
  } else {
    out.notes.push_back("no compute slices after the warm-up steps: compute not calibrated");
  }
  if (measured.optimizer_s > 0 && predicted.optimizer_s > 0) {
    out.measured_optimizer_s = measured.optimizer_s;
    out.predicted_optimizer_s = predicted.optimizer_s * sharing;
    out.optimizer_scale = measured.optimizer_s / out.predicted_optimizer_s;
  }
  return Status::ok();
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

StatusOr<Calibration> measure_calibration(const profiler::SqliteDb& db, const std::string& source,
                                          const CostModel& uncalibrated, int skip_steps) {
  Calibration out;
  out.source = source;
  ASSIGN_OR_RETURN(std::optional<WorkloadRunConfig> run, read_workload_run_config(db));
  ASSIGN_OR_RETURN(RankPlacement placement, rank_placement(db));
  if (run) {
    const int devices = uncalibrated.comm.machines().devices_per_node;
    const double sharing = devices > 0 && placement.most_ranks_on_a_host > devices
                               ? static_cast<double>(placement.most_ranks_on_a_host) / devices
                               : 1.0;
    RETURN_IF_ERROR(calibrate_compute(db, *run, uncalibrated, skip_steps, sharing, out));
  } else {
    out.notes.push_back("not a built-in workload's trace (no model in its run config): compute "
                        "and optimizer speed not calibrated, collectives only");
  }
  const LinkLevel level = placement.hosts > 1 ? LinkLevel::kInterNode : LinkLevel::kIntraNode;
  ASSIGN_OR_RETURN(out.collectives, fit_collectives(db, skip_steps, level));
  if (!out.compute_scale && out.collectives.empty()) {
    return Status(StatusCode::kUnreadable,
                  fmt::format("{}: nothing to calibrate from (no compute slices and no completed "
                              "collectives after {} warm-up step(s)); trace a run with more steps",
                              source, skip_steps));
  }
  return out;
}

void apply_calibrations(const std::vector<Calibration>& calibrations, CostModel& model) {
  double compute_log = 0, optimizer_log = 0;
  int computes = 0, optimizers = 0;
  std::map<std::tuple<CostedOp, LinkLevel, int>, const CollectiveFit*> best;
  for (const Calibration& c : calibrations) {
    if (c.compute_scale) compute_log += std::log(*c.compute_scale), ++computes;
    if (c.optimizer_scale) optimizer_log += std::log(*c.optimizer_scale), ++optimizers;
    for (const CollectiveFit& fit : c.collectives) {
      const CollectiveFit*& chosen = best[{fit.op, fit.level, fit.group_size}];
      if (chosen == nullptr || fit.samples > chosen->samples) chosen = &fit;
    }
  }
  for (const auto& [key, fit] : best) {
    model.comm.calibrate(fit->op, fit->level, fit->group_size, fit->link);
  }
  if (computes > 0) model.speed.scale *= std::exp(compute_log / computes);
  if (optimizers > 0) model.optimizer_bandwidth /= std::exp(optimizer_log / optimizers);
}

}  // namespace partrain::analyzers
