#include "analyzers/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <tuple>

#include "analyzers/arrival_wait.h"
#include "analyzers/bandwidth.h"
#include "analyzers/collective_arrivals.h"
#include "analyzers/interruption_fit.h"
#include "analyzers/layout_search.h"
#include "analyzers/sample_quantiles.h"
#include "analyzers/temporal_breakdown.h"
#include "analyzers/workload_run_config.h"
#include "profiler/gemm_rate_stat.h"
#include "profiler/special_function_rate_stat.h"
#include "profiler/trace_reader/damaged_rows.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

using profiler::TraceReader;

// Compute and optimizer time per step over the window: the temporal breakdown's compute not
// overlapped by communication (a blocking collective inside a compute slice is waiting, not
// work), less the optimizer's `adamw` slices. For a built-in run, the heaviest pipeline stage's
// average over its ranks (what each waited for the slowest at their collectives is the arrival
// jitter's: see arrival_samples); otherwise the busiest rank's.
struct MeasuredPhases {
  double compute_s = 0;
  double optimizer_s = 0;
};

StatusOr<MeasuredPhases> measure_phases(const TraceReader& reader, const AnalysisWindow& window,
                                        const std::optional<WorkloadRunConfig>& run) {
  MeasuredPhases measured;
  if (!window.has_steps) return measured;
  ASSIGN_OR_RETURN(TemporalBreakdown breakdown, analyze_temporal_breakdown(reader, window));
  using TimeByRank = std::map<int, int64_t>;
  ASSIGN_OR_RETURN(TimeByRank optimizer_ns,
                   profiler::compute_time_by_rank(reader, "adamw", step_filter(window)));
  struct Sums {
    double compute_s = 0, optimizer_s = 0, ranks = 0;
  };
  std::map<int, Sums> by_group;  // by pipeline stage, or by rank without a run config
  for (const RankBreakdown& rank : breakdown.ranks) {
    if (rank.steps == 0) continue;
    const auto steps = static_cast<double>(rank.steps);
    const int64_t optimizer = optimizer_ns[rank.rank];
    Sums& group = by_group[run ? run->pp_stage(rank.rank) : rank.rank];
    group.compute_s += static_cast<double>(rank.compute_only_ns() - optimizer) * 1e-9 / steps;
    group.optimizer_s += static_cast<double>(optimizer) * 1e-9 / steps;
    group.ranks += 1;
  }
  for (const auto& [key, group] : by_group) {
    measured.compute_s = std::max(measured.compute_s, group.compute_s / group.ranks);
    measured.optimizer_s = std::max(measured.optimizer_s, group.optimizer_s / group.ranks);
  }
  return measured;
}

// Below this many bus bytes a transfer is all latency: a single such size says nothing of
// bandwidth (a 4-byte loss all-reduce taking 3 ms would read as 1e-6 GB/s).
constexpr double kBandwidthBytes = 64 * 1024;

StatusOr<std::vector<CollectiveFit>> fit_collectives(const std::vector<MatchedGroup>& groups,
                                                     LinkLevel level,
                                                     std::vector<std::string>& notes) {
  // Per op and group size (latency and busbw both depend on the group, so groups are fitted
  // apart), per message size, the transfers.
  std::map<std::pair<CostedOp, int>, CollectiveFit> samples;
  for (const MatchedGroup& group : groups) {
    auto op = costed_op_from_trace(group.op);
    // A collective over one rank (a world of one) moves nothing: no link to measure. Send/recv
    // rows name their pair. Under a nanosecond is no time.
    const bool p2p = op == CostedOp::kSendRecv;
    const int ranks = p2p ? 2 : group.group_size;
    if (!group.in_window || group.bytes <= 0 || !op || ranks < 2) continue;
    const double transfer = group.transfer_s();
    if (transfer < 1e-9) continue;
    CollectiveFit& fit = samples[{*op, ranks}];
    fit.op = *op;
    fit.level = level;
    fit.group_size = ranks;
    fit.transfers_by_bytes[group.bytes].push_back(transfer);
  }
  std::vector<CollectiveFit> fits;
  for (auto& [key, fit] : samples) {
    if (auto fitted = fit_link(std::move(fit), notes)) fits.push_back(std::move(*fitted));
  }
  return fits;
}

struct RankPlacement {
  int64_t hosts = 0;
  int64_t most_ranks_on_a_host = 0;
  bool gpus_of_their_own = false;  // every rank on a GPU, no two on one GPU of a host
};

// Hosts, the most ranks one of them holds (ranks whose host is not recorded count as one), and
// whether each rank had a GPU of its own.
StatusOr<RankPlacement> rank_placement(const TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> ranks, reader.ranks());
  std::map<std::string, int64_t> per_host;
  std::set<std::pair<std::string, std::string>> gpus;  // (host, device)
  bool gpus_of_their_own = !ranks.empty();
  for (const profiler::RankRow& rank : ranks) {
    ++per_host[rank.host];
    gpus_of_their_own = gpus_of_their_own && rank.device.starts_with("cuda") &&
                        gpus.emplace(rank.host, rank.device).second;
  }
  RankPlacement placement{static_cast<int64_t>(per_host.size()), 0, gpus_of_their_own};
  for (const auto& [host, count] : per_host) {
    placement.most_ranks_on_a_host = std::max(placement.most_ranks_on_a_host, count);
  }
  return placement;
}

// Whether the run's ranks had devices of their own, so that nothing but their own rates set them
// apart: CPU ranks bound to cores of their own (launch --cpu-bind core), or GPU ranks, no two on
// one GPU. Unbound CPU ranks share the cores with each other's helper threads.
bool ranks_on_devices_of_their_own(const RankPlacement& placement, const WorkloadRunConfig& run) {
  return run.cpu_bind == "core" || placement.gpus_of_their_own;
}

// The positive values the run's ranks recorded for one stat.
std::vector<double> stat_values(const std::vector<profiler::StatRow>& stats,
                                std::string_view name) {
  std::vector<double> values;
  for (const profiler::StatRow& stat : stats) {
    if (stat.name == name && stat.value > 0) values.push_back(static_cast<double>(stat.value));
  }
  return values;
}

// The special-function rate the run's ranks measured on their cores at start, the best of them
// (as the run's GEMM peak is): a probe of a few milliseconds is only ever slowed by what else ran
// (on the 2-core VM, 45-46 M evaluations/s against 66-67 M in 1 probe of 3), never sped up.
// nullopt when none measured (a GPU run, a trace from before the stat).
std::optional<double> measured_special_function_rate(const std::vector<profiler::StatRow>& stats) {
  const std::vector<double> rates = stat_values(stats, profiler::kSpecialFunctionRateStat);
  if (rates.empty()) return std::nullopt;
  return *std::max_element(rates.begin(), rates.end());
}

// The FLOP/s the run's GEMMs achieved over its steps, the mean over its ranks (each rank's GEMMs
// ran under whatever shared its core, as its compute did); nullopt when none recorded it.
std::optional<double> measured_gemm_rate(const std::vector<profiler::StatRow>& stats) {
  const std::vector<double> rates = stat_values(stats, profiler::kGemmRateStat);
  if (rates.empty()) return std::nullopt;
  return std::accumulate(rates.begin(), rates.end(), 0.0) / static_cast<double>(rates.size());
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
  // The same prediction by kind: GEMMs alone (the rest free), memory-bound work alone, the
  // special-function-paced work alone.
  CostModel gemms_only = own, memory_only = own, special_only = own;
  gemms_only.speed.memory_scale = gemms_only.speed.special_scale = 0;
  memory_only.speed.gemm_scale = memory_only.speed.special_scale = 0;
  special_only.speed.gemm_scale = special_only.speed.memory_scale = 0;
  out.run_layout = layout_label(input.layout);
  ASSIGN_OR_RETURN(MeasuredPhases measured,
                   measure_phases(reader, window, std::optional<WorkloadRunConfig>(run)));
  if (measured.compute_s > 0 && predicted.compute_s > 0) {
    out.measured_compute_s = measured.compute_s;
    out.predicted_compute_s = predicted.compute_s * sharing;
    out.predicted_gemm_s = step_cost(gemms_only, estimate).compute_s * sharing;
    out.predicted_memory_s = step_cost(memory_only, estimate).compute_s * sharing;
    out.predicted_special_s = step_cost(special_only, estimate).compute_s * sharing;
    if (out.gemm_rate) {
      // The same GEMMs at the rate the run's own achieved: every FLOP at it, no waves or launch
      // overhead of the preset's, and no sharing factor (the rate was measured under it).
      CostModel at_rate = gemms_only;
      at_rate.speed.peak_flops = *out.gemm_rate;
      at_rate.speed.gemm_efficiency = 1;
      at_rate.speed.sm_count = 0;
      at_rate.speed.kernel_overhead_s = 0;
      out.measured_gemm_s = step_cost(at_rate, estimate).compute_s;
    }
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

std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& points,
                                const std::vector<double>& weights) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto [x, y] = points[i];
    const double w = i < weights.size() ? weights[i] : 1;
    n += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  const double denominator = n * sxx - sx * sx;
  if (points.size() < 2 || denominator <= 1e-12 * n * sxx) return std::nullopt;
  LineFit fit;
  fit.slope = (n * sxy - sx * sy) / denominator;
  fit.intercept = (sy - fit.slope * sx) / n;
  if (fit.slope <= 0) return std::nullopt;
  return fit;
}

namespace {

double quantile_of(const std::vector<double>& values, double q) {
  SampleQuantiles quantiles;
  for (double value : values) quantiles.add(value);
  return quantiles.quantile(q);
}

double mean_of(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

}  // namespace

std::optional<CollectiveFit> fit_link(CollectiveFit fit, std::vector<std::string>& notes) {
  const CostedOp op = fit.op;
  const int group = fit.group_size;
  const double factor = busbw_factor(costed_op_name(op), group).value_or(1.0);
  const int steps = std::max(1, latency_steps(op, group));
  struct Size {
    double x = 0;       // S x factor
    double link_s = 0;  // the lower quartile of the transfers: the link undisturbed
    double mean_s = 0;  // their mean: the link and the delays that recur with every collective
    double weight = 0;  // samples
  };
  std::vector<Size> sizes;
  fit.samples = 0;
  for (const auto& [bytes, transfers] : fit.transfers_by_bytes) {
    if (transfers.empty()) continue;
    sizes.push_back({bytes * factor, quantile_of(transfers, 0.25), mean_of(transfers),
                     static_cast<double>(transfers.size())});
    fit.samples += static_cast<int64_t>(transfers.size());
  }
  if (sizes.empty()) return std::nullopt;
  fit.sizes = static_cast<int>(sizes.size());
  // Bandwidth shows only in bandwidth-sized messages (64 KiB of bus bytes and more), and only
  // when their transfer is not mostly latency: a latency that depends on when the collective
  // runs (on a CPU, 0.2 ms for the loss all-reduce at the step's end, up to a scheduler tick
  // more for one whose bytes wait on a busy core) would otherwise pass for a slope.
  std::vector<std::pair<double, double>> large;  // (S x factor, link time)
  std::vector<double> large_weights;
  double small_link = 0, small_weight = 0;
  for (const Size& size : sizes) {
    if (size.x >= kBandwidthBytes) {
      large.emplace_back(size.x, size.link_s);
      large_weights.push_back(size.weight);
    } else {
      small_link += size.weight * size.link_s, small_weight += size.weight;
    }
  }
  fit.bandwidth_measured = false;
  if (large.size() >= 2) {
    if (const auto line = fit_line(large, large_weights)) {
      fit.link.bandwidth = 1 / line->slope;
      fit.bandwidth_measured = true;
    }
  }
  if (!fit.bandwidth_measured && !large.empty()) {
    // The largest size's transfer less the small messages' latency, when that is most of it.
    const auto [x, t] = large.back();
    const double latency = small_weight > 0 ? small_link / small_weight : 0;
    if (t - latency >= 0.5 * t) {
      fit.link.bandwidth = x / (t - latency);
      fit.bandwidth_measured = true;
    }
  }
  if (!fit.bandwidth_measured) {
    notes.push_back(fmt::format(
        "{} over {} ranks: messages up to {} B, their time mostly latency: latency calibrated, "
        "busbw left as it was",
        costed_op_name(op), group, fit.transfers_by_bytes.rbegin()->first));
  }
  auto transfer_at = [&](double x) { return fit.bandwidth_measured ? x / fit.link.bandwidth : 0; };
  // With the busbw measured, the latency comes from the messages that are mostly latency when
  // there are some: a long transfer's delays grow with its length and with what else the cores
  // run (a 13 MB all-reduce's spread above its fastest quarter is milliseconds), and charged
  // per collective they priced each of a tp layout's 1 KiB all-reduces as a 13 MB one.
  const bool latency_from_small = fit.bandwidth_measured && small_weight > 0;
  double latency = 0, count = 0;
  for (const Size& size : sizes) {
    if (latency_from_small && size.x >= kBandwidthBytes) continue;
    latency += size.weight * (size.mean_s - transfer_at(size.x)), count += size.weight;
  }
  fit.link.latency_s = std::max(0.0, latency / count) / steps;
  double squares = 0;
  for (const Size& size : sizes) {
    const double fitted = steps * fit.link.latency_s + transfer_at(size.x);
    squares += (fitted - size.mean_s) * (fitted - size.mean_s) / (size.mean_s * size.mean_s);
  }
  fit.rms_error = std::sqrt(squares / static_cast<double>(sizes.size()));
  return fit;
}

std::optional<ArrivalDriftFit> fit_arrival_drift(std::vector<ArrivalSample> arrivals) {
  // Ranks on devices of their own: the rate spread = sum of waits / sum of e(n) W. Ranks sharing
  // cores: the interruptions that fit their kinds' waits (analyzers/interruption_fit.h).
  using KindKey = std::tuple<CostedOp, double, int, bool>;
  auto key_of = [](const ArrivalSample& a) {
    return KindKey{a.op, a.bytes, a.ranks, a.own_devices};
  };
  std::map<KindKey, int> kind_ids;
  std::vector<SharedCoreWait> shared;
  double rate_waits = 0, rate_drift = 0;
  for (const ArrivalSample& a : arrivals) {
    if (a.own_devices) {
      rate_waits += a.wait_s;
      rate_drift += expected_max_of_normals(a.ranks) * a.since_sync_s;
      continue;
    }
    const int kind =
        kind_ids.try_emplace(key_of(a), static_cast<int>(kind_ids.size())).first->second;
    shared.push_back({kind, a.ranks, a.since_sync_s, a.wait_s});
  }
  ArrivalDriftFit fit;
  if (const auto walk = fit_interruptions(shared)) fit.drift = *walk;
  if (rate_waits > 0 && rate_drift > 0) fit.drift.rate_spread = rate_waits / rate_drift;
  if (fit.drift.jitter <= 0 && fit.drift.rate_spread <= 0) return std::nullopt;
  fit.samples = static_cast<int64_t>(arrivals.size());
  // By kind of collective (and law): the measured and the fitted waits' sums, each law's wait
  // alone.
  const ArrivalDrift shared_law{fit.drift.jitter, fit.drift.interruption_s, 0};
  const ArrivalDrift rate_law{.rate_spread = fit.drift.rate_spread};
  std::map<KindKey, std::array<double, 2>> kinds;
  for (const ArrivalSample& a : arrivals) {
    auto& kind = kinds[key_of(a)];
    kind[0] += a.wait_s;
    kind[1] += arrival_wait_s(a.own_devices ? rate_law : shared_law, a.ranks, a.since_sync_s);
  }
  double squares = 0;
  for (const auto& [key, kind] : kinds) {
    if (kind[0] <= 0) continue;  // no wait measured: nothing to compare
    const double fitted = kind[1];
    squares += (fitted - kind[0]) * (fitted - kind[0]) / (kind[0] * kind[0]);
    ++fit.kinds;
  }
  fit.rms_error = fit.kinds > 0 ? std::sqrt(squares / fit.kinds) : 0;
  fit.arrivals = std::move(arrivals);
  return fit;
}

std::string ArrivalDriftFit::rms_text() const {
  const int fitted = (drift.jitter > 0) + (drift.interruption_s > 0) + (drift.rate_spread > 0);
  std::string text = fmt::format("within {:.1f}% rms", 100 * rms_error);
  if (kinds > 0 && fitted >= kinds) {
    text += fmt::format(
        " ({} fitted value{} for {} kind{}: exact by construction, not a test of "
        "the law)",
        fitted, fitted == 1 ? "" : "s", kinds, kinds == 1 ? "" : "s");
  }
  return text;
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
  if (chosen->ranks.empty()) return nothing_to_calibrate(source, "the trace has no ranks");
  const AnalysisWindow& window = *chosen;
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> row, reader.run());
  const profiler::RunStatus status =
      row && row->status ? *row->status : profiler::RunStatus::kRunning;
  if (run && !window.has_steps && status != profiler::RunStatus::kCompleted) {
    // A built-in workload marks every step: one that failed, was stopped or is still starting
    // without a step never trained, and what it recorded is start-up (the process groups' first
    // collectives), not a step's work.
    return nothing_to_calibrate(
        source, fmt::format("the {} run recorded no step: its collectives are start-up's, not "
                            "training's",
                            profiler::run_status_name(status)));
  }
  ASSIGN_OR_RETURN(const std::vector<profiler::DamagedRows> damaged,
                   profiler::damaged_rows(reader));
  if (!damaged.empty()) {
    std::map<std::string, int64_t> rows;  // by kind, every rank's
    for (const profiler::DamagedRows& d : damaged) rows[d.name] += d.rows;
    std::string kinds;
    for (const auto& [name, count] : rows) {
      kinds += fmt::format("{}{} = {}", kinds.empty() ? "" : ", ", name, count);
    }
    out.notes.push_back(fmt::format(
        "the trace holds rows whose values cannot be true (the file was damaged or edited: {}): "
        "they are left out of this calibration or read as not recorded; `partrain analyze` "
        "lists them",
        kinds));
  }
  if (run) {
    const double sharing = sharing_factor(placement.most_ranks_on_a_host,
                                          uncalibrated.comm.machines().devices_per_node);
    // The activation's special function at the rate the run's own cores measured, when they did.
    ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader.stats());
    out.special_function_rate = measured_special_function_rate(stats);
    out.gemm_rate = measured_gemm_rate(stats);
    CostModel measured = uncalibrated;
    if (out.special_function_rate) {
      measured.speed.special_function_rate = *out.special_function_rate;
    }
    RETURN_IF_ERROR(calibrate_compute(reader, *run, measured, window, sharing, placement, out));
  } else {
    out.notes.push_back(
        "not a built-in workload's trace (no model in its run config): compute "
        "and optimizer speed not calibrated, collectives only");
  }
  const LinkLevel level = placement.hosts > 1 ? LinkLevel::kInterNode : LinkLevel::kIntraNode;
  ASSIGN_OR_RETURN(const std::vector<MatchedGroup> groups, matched_groups(reader, window));
  ASSIGN_OR_RETURN(out.collectives, fit_collectives(groups, level, out.notes));
  if (run) {
    std::vector<ArrivalSample> arrivals = arrival_samples(groups, *run);
    const bool own_devices = ranks_on_devices_of_their_own(placement, *run);
    for (ArrivalSample& a : arrivals) a.own_devices = own_devices;
    out.arrival_drift = fit_arrival_drift(std::move(arrivals));
    if (!out.arrival_drift) {
      out.notes.push_back(
          "no collective among ranks of one pipeline stage waited for another: the ranks' "
          "arrival drift is not calibrated from this run (a tp or dp layout's wait for its last "
          "rank is left out unless another run gives it)");
    }
  }
  for (CollectiveFit& fit : out.collectives) {  // not measured: the busbw it keeps, reported
    if (!fit.bandwidth_measured)
      fit.link.bandwidth = uncalibrated.comm.machines().link(level).bandwidth;
  }
  if (!out.compute_scale && out.collectives.empty()) {
    return nothing_to_calibrate(
        source, fmt::format("no compute slices and no completed collectives after {} warm-up "
                            "step(s)",
                            skip_steps));
  }
  return out;
}

std::optional<ComputeKindFit> fit_compute_kinds(const std::vector<Calibration>& calibrations,
                                                double min_gemm_scale) {
  struct Run {
    double gemm_s, memory_s, special_s, measured_s, measured_gemm_s;
  };
  std::vector<Run> runs;
  for (const Calibration& c : calibrations) {
    if (c.compute_scale && c.predicted_gemm_s + c.predicted_memory_s > 0) {
      runs.push_back({c.predicted_gemm_s, c.predicted_memory_s, c.predicted_special_s,
                      c.measured_compute_s, c.measured_gemm_s});
    }
  }
  if (runs.empty()) return std::nullopt;
  ComputeKindFit fit;
  fit.runs = static_cast<int>(runs.size());
  auto fitted_rms = [&] {
    double squares = 0;
    for (const Run& r : runs) {
      const double fitted = fit.gemm_scale * r.gemm_s + fit.memory_scale * r.memory_s +
                            fit.special_scale * r.special_s;
      squares += (fitted - r.measured_s) * (fitted - r.measured_s) / (r.measured_s * r.measured_s);
    }
    return std::sqrt(squares / static_cast<double>(runs.size()));
  };
  // No GEMM runs faster than the peak: a fit that asks for it is held there.
  auto hold_at_peak = [&] {
    if (fit.gemm_scale >= min_gemm_scale) return;
    fit.gemm_scale = min_gemm_scale;
    fit.at_peak = true;
  };
  fit.special_held = std::all_of(runs.begin(), runs.end(),
                                 [](const Run& r) { return r.special_s < r.measured_s; });
  if (!fit.special_held) {
    double sum = 0, squares = 0;
    for (const Run& r : runs) {
      const double p = (r.gemm_s + r.memory_s + r.special_s) / r.measured_s;
      sum += p, squares += p * p;
    }
    fit.gemm_scale = fit.memory_scale = fit.special_scale = sum / squares;
    hold_at_peak();
    fit.rms_error = fitted_rms();
    return fit;
  }
  // Relative least squares: each run's equation divided by its measurement; the scaled kinds
  // fit what the special-function-paced work leaves (y, 1 without it).
  double gg = 0, gm = 0, mm = 0, g1 = 0, m1 = 0;
  for (const Run& r : runs) {
    const double g = r.gemm_s / r.measured_s, m = r.memory_s / r.measured_s;
    const double y = 1 - r.special_s / r.measured_s;
    gg += g * g, gm += g * m, mm += m * m, g1 += g * y, m1 += m * y;
  }
  const double det = gg * mm - gm * gm;
  // Runs of one mix leave the two rates undetermined: a near-singular system (its mixes' angle
  // under about 2 degrees) fits one of them only.
  if (runs.size() >= 2 && det > 1e-3 * gg * mm) {
    fit.gemm_scale = (g1 * mm - m1 * gm) / det;
    fit.memory_scale = (m1 * gg - g1 * gm) / det;
    fit.gemm_fitted = fit.gemm_scale > 0 && fit.memory_scale > 0;
    if (fit.gemm_fitted && fit.gemm_scale < min_gemm_scale) {
      fit.gemm_scale = min_gemm_scale;
      fit.memory_scale = (m1 - min_gemm_scale * gm) / mm;
      fit.at_peak = true;
      fit.gemm_fitted = fit.memory_scale > 0;
    }
  }
  if (!fit.gemm_fitted) {
    // The GEMMs at the rate the runs' own GEMMs achieved where every run measured it, else at the
    // preset's; the memory-bound work takes the rest.
    double measured_gemm = 0, predicted_gemm = 0;
    for (const Run& r : runs) measured_gemm += r.measured_gemm_s, predicted_gemm += r.gemm_s;
    fit.gemm_measured =
        predicted_gemm > 0 &&
        std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.measured_gemm_s > 0; });
    fit.gemm_scale = fit.gemm_measured ? measured_gemm / predicted_gemm : 1;
    hold_at_peak();
    fit.memory_scale = mm > 0 ? (m1 - fit.gemm_scale * gm) / mm : 0;
    if (fit.memory_scale <= 0) {
      // The GEMMs alone outlast what was measured: one scale for both kinds.
      fit.gemm_measured = fit.at_peak = false;
      double sum = 0, squares = 0;
      for (const Run& r : runs) {
        const double p = (r.gemm_s + r.memory_s) / r.measured_s;
        sum += p * (1 - r.special_s / r.measured_s), squares += p * p;
      }
      fit.gemm_scale = fit.memory_scale = sum / squares;
      hold_at_peak();
    }
  }
  fit.rms_error = fitted_rms();
  return fit;
}

void apply_calibrations(std::vector<Calibration>& calibrations, CostModel& model) {
  double optimizer_log = 0;
  int optimizers = 0;
  // Every trace's samples of one op, link level and group size pooled into one fit over all the
  // sizes they saw: one trace's small messages inform the latency, another's large ones the busbw.
  std::map<std::tuple<CostedOp, LinkLevel, int>, CollectiveFit> pooled;
  std::vector<ArrivalSample> arrivals;
  std::optional<double> measured_special_function_rate;  // the best the runs' cores measured
  for (const Calibration& c : calibrations) {
    if (c.special_function_rate) {
      measured_special_function_rate =
          std::max(measured_special_function_rate.value_or(0), *c.special_function_rate);
    }
    if (c.optimizer_scale) optimizer_log += std::log(*c.optimizer_scale), ++optimizers;
    for (const CollectiveFit& fit : c.collectives) {
      CollectiveFit& into = pooled[{fit.op, fit.level, fit.group_size}];
      into.op = fit.op, into.level = fit.level, into.group_size = fit.group_size;
      for (const auto& [bytes, transfers] : fit.transfers_by_bytes) {
        auto& all = into.transfers_by_bytes[bytes];
        all.insert(all.end(), transfers.begin(), transfers.end());
      }
    }
    if (c.arrival_drift) {
      arrivals.insert(arrivals.end(), c.arrival_drift->arrivals.begin(),
                      c.arrival_drift->arrivals.end());
    }
  }
  const int arrival_runs = static_cast<int>(
      std::count_if(calibrations.begin(), calibrations.end(),
                    [](const Calibration& c) { return c.arrival_drift.has_value(); }));
  if (const auto drift = fit_arrival_drift(std::move(arrivals))) {
    model.arrival_drift = drift->drift;
    if (arrival_runs > 1) {  // said once, with the last run that informed it
      auto informed = std::find_if(calibrations.rbegin(), calibrations.rend(),
                                   [](const auto& c) { return c.arrival_drift.has_value(); });
      informed->notes.push_back(fmt::format(
          "arrival drift pooled over {} runs: {} from {} collectives, the kinds' mean waits {}",
          arrival_runs, arrival_drift_text(drift->drift), drift->samples, drift->rms_text()));
    }
  }
  std::vector<std::string> pooled_notes;  // each trace's own fit already said so
  for (auto& [key, samples] : pooled) {
    const auto fit = fit_link(std::move(samples), pooled_notes);
    if (!fit) continue;
    Link link = fit->link;
    if (!fit->bandwidth_measured) {
      link.bandwidth = model.comm.machines().link(fit->level).bandwidth;  // the preset's
    }
    model.comm.calibrate(fit->op, fit->level, fit->group_size, link);
  }
  const double preset_special_function_rate = model.speed.special_function_rate;
  if (measured_special_function_rate) {
    model.speed.special_function_rate = *measured_special_function_rate;
  }
  if (const auto kinds = fit_compute_kinds(calibrations, model.speed.gemm_efficiency)) {
    model.speed.gemm_scale *= kinds->gemm_scale;
    model.speed.memory_scale *= kinds->memory_scale;
    model.speed.special_scale *= kinds->special_scale;
    // Said once, with the last run that informed it.
    auto informed = std::find_if(calibrations.rbegin(), calibrations.rend(),
                                 [](const Calibration& c) { return c.compute_scale.has_value(); });
    informed->notes.push_back(fmt::format(
        "compute fitted by kind over {} run{}: GEMMs x{:.3g}{}, memory-bound work x{:.3g} of the "
        "preset's time{}; the runs' compute within {:.1f}% rms",
        kinds->runs, kinds->runs == 1 ? "" : "s", kinds->gemm_scale,
        kinds->at_peak       ? " (the fit asked for more than the peak: held at it)"
        : kinds->gemm_fitted ? ""
        : kinds->gemm_measured
            ? " (the runs' mixes of GEMM and memory-bound work do not tell them apart: the rate "
              "the runs' own GEMMs achieved)"
            : " (not fitted: the runs' mixes of GEMM and memory-bound work do not tell them "
              "apart; the preset's rate)",
        kinds->memory_scale,
        !kinds->special_held
            ? fmt::format(
                  ", the activation's special function at {:.3g} M evaluations/s outlasting a "
                  "run's whole compute (that rate cannot be right: every kind takes one scale, "
                  "x{:.3g})",
                  model.speed.special_function_rate / 1e6, kinds->special_scale)
        : informed->predicted_special_s > 0
            ? fmt::format(
                  ", the activation's special function at {:.3g} M evaluations/s ({}; not fitted: "
                  "a block's slices do not tell it apart)",
                  model.speed.special_function_rate / 1e6,
                  !measured_special_function_rate
                      ? std::string("the preset's")
                      : fmt::format("measured by the runs' cores at start; the preset's {:.3g} M",
                                    preset_special_function_rate / 1e6))
            : "",
        100 * kinds->rms_error));
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
