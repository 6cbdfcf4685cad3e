// analyze_pipeline_bubble: per rank and step of the window, the forward/backward phase slices
// give the stage's busy time (their union) and its first and last action; the pipeline's flush
// is the earliest first action to the latest last action over the ranks of one pipeline (same
// tp and dp coordinates). Bubble = flush - busy, the time the stage waits inside the schedule;
// the optimizer and gradient reduction around the flush are not pipeline bubble.
#include "analyzers/pipeline_bubble.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "analyzers/pipeline_simulation.h"
#include "analyzers/workload_run_config.h"
#include "core/duration.h"
#include "core/number_format.h"
#include "memory/pipeline.h"
#include "memory/pipeline_order.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

using profiler::TraceReader;

struct PhaseAction {
  bool forward = true;
  int micro_batch = -1;
  int64_t start = 0, end = 0;
  bool weight = false;
};

struct RankStep {
  std::vector<PhaseAction> actions;  // in order of start
  int rank = 0;
  int64_t step = 0;
  int64_t step_ns = 0;
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  int64_t busy = 0;
  int64_t forward = 0, backward = 0, weight = 0;
  int forwards = 0, backwards = 0, weights = 0;
};

// Fills busy, first/last and the action sums from the forward and backward phases starting in
// [start, end); false on a read error.
bool measure_phases(profiler::PipelineActionCursor& phases, int64_t start, int64_t end,
                    RankStep& out) {
  phases.over(start, end);
  int64_t open_start = 0, open_end = std::numeric_limits<int64_t>::min();
  profiler::PipelineAction action;
  while (phases.next(action)) {
    const int64_t s = action.start_ns, e = action.end_ns;
    const bool forward = action.forward;
    out.actions.push_back({forward, action.micro_batch, s, e, action.weight});
    if (action.weight) {
      out.weight += e - s;
      ++out.weights;
    } else {
      (forward ? out.forward : out.backward) += e - s;
      ++(forward ? out.forwards : out.backwards);
    }
    out.first = std::min(out.first, s);
    out.last = std::max(out.last, e);
    if (s > open_end) {  // slices come by start time, so one open interval is enough
      if (open_end > open_start) out.busy += open_end - open_start;
      open_start = s;
      open_end = e;
    } else {
      open_end = std::max(open_end, e);
    }
  }
  if (open_end > open_start) out.busy += open_end - open_start;
  return phases.status().is_ok();
}

StatusOr<std::vector<RankStep>> measure_rank(const TraceReader& reader,
                                             const AnalysisWindow& window, int rank) {
  ASSIGN_OR_RETURN(profiler::PipelineActionCursor phases, profiler::pipeline_actions(reader, rank));
  std::vector<RankStep> out;
  if (!window.has_steps) {
    const RankSpan& span = window.spans.at(rank);
    RankStep row{{}, rank, 0, span.duration_ns()};
    if (!measure_phases(phases, span.start_ns, span.end_ns, row)) return phases.status();
    out.push_back(row);
    return out;
  }
  ASSIGN_OR_RETURN(profiler::StepCursor steps,
                   profiler::rank_steps(reader, rank, window.first_step, window.last_step));
  profiler::StepRow step;
  while (steps.next(step)) {
    RankStep row{{}, rank, step.step, step.dur_ns};
    if (!measure_phases(phases, step.ts_ns, step.ts_ns + row.step_ns, row)) {
      return phases.status();
    }
    if (row.forwards + row.backwards > 0) out.push_back(row);
  }
  RETURN_IF_ERROR(steps.status());
  return out;
}

// Sums per stage over (rank, step) pairs, with the flush of the rank's pipeline in that step.
std::vector<StageBubble> stage_means(const std::vector<RankStep>& rows,
                                     const WorkloadRunConfig& config) {
  std::map<std::pair<int, int64_t>, std::pair<int64_t, int64_t>> flush;  // (pipeline, step)
  for (const RankStep& r : rows) {
    auto [it, fresh] = flush.try_emplace({config.pipeline_of(r.rank), r.step}, r.first, r.last);
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.first);
      it->second.second = std::max(it->second.second, r.last);
    }
  }
  std::vector<StageBubble> stages(static_cast<size_t>(config.resolved.layout.pp));
  std::vector<int64_t> forwards(stages.size()), backwards(stages.size()), weights(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) stages[s].stage = static_cast<int>(s);
  for (const RankStep& r : rows) {
    StageBubble& st = stages.at(static_cast<size_t>(config.pp_stage(r.rank)));
    const auto [first, last] = flush.at({config.pipeline_of(r.rank), r.step});
    const double span = static_cast<double>(last - first);
    const double bubble = span - static_cast<double>(r.busy);
    ++st.samples;
    st.step_ns += static_cast<double>(r.step_ns);
    st.flush_ns += span;
    st.busy_ns += static_cast<double>(r.busy);
    st.bubble_ns += bubble;
    st.bubble_of_flush += span > 0 ? bubble / span : 0;
    st.bubble_of_ideal += r.busy > 0 ? bubble / static_cast<double>(r.busy) : 0;
    st.forward_ns += static_cast<double>(r.forward);
    st.backward_ns += static_cast<double>(r.backward);
    st.weight_ns += static_cast<double>(r.weight);
    forwards[static_cast<size_t>(st.stage)] += r.forwards;
    backwards[static_cast<size_t>(st.stage)] += r.backwards;
    weights[static_cast<size_t>(st.stage)] += r.weights;
  }
  for (StageBubble& st : stages) {
    const auto s = static_cast<size_t>(st.stage);
    if (forwards[s] > 0) st.forward_ns /= static_cast<double>(forwards[s]);
    if (backwards[s] > 0) st.backward_ns /= static_cast<double>(backwards[s]);
    if (weights[s] > 0) st.weight_ns /= static_cast<double>(weights[s]);
    if (st.samples == 0) continue;
    const double n = st.samples;
    for (double* v : {&st.step_ns, &st.flush_ns, &st.busy_ns, &st.bubble_ns, &st.bubble_of_flush,
                      &st.bubble_of_ideal}) {
      *v /= n;
    }
  }
  return stages;
}

// The model chunk of each of a rank's actions, which the phase slices do not name: the stage
// itself but under DualPipeV, whose rank r runs a micro-batch's first forward on chunk r (down the
// V) and its second on 2p - 1 - r, and its backwards the other way round (a chunk's backward needs
// the next chunk's). -1 for weight passes and unknown micro-batches.
std::vector<int> action_chunks(const RankStep& row, memory::PipelineSchedule schedule, int pp,
                               int stage) {
  std::vector<int> chunks;
  std::map<std::pair<bool, int>, int> seen;  // (forward, micro-batch): slices so far
  for (const PhaseAction& a : row.actions) {
    if (a.weight || a.micro_batch < 0) {
      chunks.push_back(-1);
      continue;
    }
    if (schedule != memory::PipelineSchedule::kDualPipeV) {
      chunks.push_back(stage);
      continue;
    }
    const bool first = seen[{a.forward, a.micro_batch}]++ == 0;
    chunks.push_back(first == a.forward ? stage : 2 * pp - 1 - stage);
  }
  return chunks;
}

int64_t median(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// Two medians over the measured actions, for the simulation:
// - transfer: from an action's end to the start of the action on the adjacent stage that needed
//   its output, when that dependency held the consumer up (its stage had finished its previous
//   action by then);
// - gap: between two actions of one stage when the second's input was already there.
// Where a slice's chunk is known (action_chunks): not under interleaving.
void measure_delays(const std::vector<RankStep>& rows, const WorkloadRunConfig& config,
                    PipelineBubbleReport& report) {
  struct Labelled {
    const RankStep* row = nullptr;
    std::vector<int> chunks;
  };
  const int pp = report.pp;
  const int last_chunk = memory::pipeline_chunks(report.schedule, pp, report.vpp) - 1;
  std::map<std::tuple<int, int64_t, int>, Labelled> at;  // (pipeline, step, stage)
  for (const RankStep& r : rows) {
    const int stage = config.pp_stage(r.rank);
    at[{config.pipeline_of(r.rank), r.step, stage}] = {
        &r, action_chunks(r, report.schedule, pp, stage)};
  }
  // The producer of action i's input on another stage, or null (none, or this stage's own).
  auto producer_of = [&](int pipeline, int64_t step, int stage, const Labelled& consumer,
                         size_t i) -> const PhaseAction* {
    const PhaseAction& a = consumer.row->actions[i];
    const int chunk = consumer.chunks[i];
    const int from = a.forward ? chunk - 1 : chunk + 1;
    if (chunk < 0 || from < 0 || from > last_chunk) return nullptr;
    const int from_stage = memory::chunk_rank(report.schedule, pp, from);
    if (from_stage == stage) return nullptr;
    auto row = at.find({pipeline, step, from_stage});
    if (row == at.end()) return nullptr;
    const std::vector<PhaseAction>& actions = row->second.row->actions;
    for (size_t k = 0; k < actions.size(); ++k) {
      if (!actions[k].weight && actions[k].forward == a.forward &&
          actions[k].micro_batch == a.micro_batch && row->second.chunks[k] == from) {
        return &actions[k];
      }
    }
    return nullptr;
  };
  std::vector<int64_t> transfers, gaps;
  for (const auto& [key, consumer] : at) {
    const auto& [pipeline, step, stage] = key;
    for (size_t i = 0; i < consumer.row->actions.size(); ++i) {
      const PhaseAction& a = consumer.row->actions[i];
      const int64_t free_at = i > 0 ? consumer.row->actions[i - 1].end : a.start;
      const PhaseAction* producer = producer_of(pipeline, step, stage, consumer, i);
      if (producer != nullptr && producer->end > free_at) {
        if (a.start >= producer->end) transfers.push_back(a.start - producer->end);
      } else if (i > 0 && a.start >= free_at) {
        gaps.push_back(a.start - free_at);
      }
    }
  }
  report.transfer_ns = static_cast<double>(median(std::move(transfers)));
  report.gap_ns = static_cast<double>(median(std::move(gaps)));
}

// The zero-bubble schedules' theory depends on how W compares with F and B: the measured means
// over the stages that have them.
void zero_bubble_theory(PipelineBubbleReport& report) {
  double F = 0, B = 0, W = 0;
  int n = 0;
  for (const StageBubble& st : report.stages) {
    if (st.samples == 0) continue;
    F += st.forward_ns;
    B += st.backward_ns;
    W += st.weight_ns;
    ++n;
  }
  if (n == 0) return;
  report.theory_bubble_of_ideal = memory::split_bubble_fraction(
      report.schedule, report.pp, report.micro_batches, F / n, B / n, W / n);
  report.theory_bubble_of_flush =
      report.theory_bubble_of_ideal / (1 + report.theory_bubble_of_ideal);
}

Status simulate_measured(PipelineBubbleReport& report) {
  PipelineSimInput in;
  in.schedule = report.schedule;
  in.pp = report.pp;
  in.vpp = report.vpp;
  in.micro_batches = report.micro_batches;
  in.transfer = report.transfer_ns;
  in.gap = report.gap_ns;
  for (const StageBubble& st : report.stages) {
    in.forward.push_back(st.forward_ns);
    in.backward.push_back(st.backward_ns);
    in.weight.push_back(st.weight_ns);
  }
  ASSIGN_OR_RETURN(PipelineSimulation sim, simulate_pipeline(in));
  report.simulated_flush_ns = sim.step_time;
  for (StageBubble& st : report.stages) {
    st.simulated_bubble_of_flush = sim.bubble_of_step(st.stage);
    st.simulated_bubble_of_ideal = sim.bubble_of_ideal(st.stage);
  }
  return Status::ok();
}

}  // namespace

double PipelineBubbleReport::mean_bubble_of_flush() const {
  double sum = 0;
  for (const StageBubble& st : stages) sum += st.bubble_of_flush;
  return stages.empty() ? 0 : sum / static_cast<double>(stages.size());
}

double PipelineBubbleReport::mean_simulated_bubble_of_flush() const {
  double sum = 0;
  for (const StageBubble& st : stages) sum += st.simulated_bubble_of_flush;
  return stages.empty() ? 0 : sum / static_cast<double>(stages.size());
}

StatusOr<PipelineBubbleReport> analyze_pipeline_bubble(const TraceReader& reader,
                                                       const AnalysisWindow& window) {
  PipelineBubbleReport report;
  ASSIGN_OR_RETURN(std::optional<WorkloadRunConfig> config, read_workload_run_config(reader));
  if (!config) {
    report.reason = "the run's config is not a built-in workload's: pipeline layout unknown";
    return report;
  }
  const memory::TrainingLayout& layout = config->resolved.layout;
  if (layout.pp < 2) {
    report.reason = "not a pipeline-parallel run (pp = 1)";
    return report;
  }
  report.schedule = layout.schedule;
  report.pp = layout.pp;
  report.vpp = layout.schedule == memory::PipelineSchedule::kInterleaved ? layout.vpp : 1;
  report.micro_batches = static_cast<int>(config->resolved.micro_batches);
  report.layers = config->model.layers;
  // Narayanan 2021 sec. 2.2; the zero-bubble schedules' with F = B = W until measured.
  report.theory_bubble_of_ideal =
      memory::bubble_fraction(report.schedule, report.pp, report.micro_batches, report.vpp);
  report.theory_bubble_of_flush =
      report.theory_bubble_of_ideal / (1 + report.theory_bubble_of_ideal);
  std::vector<RankStep> rows;
  for (int rank : window.ranks) {
    ASSIGN_OR_RETURN(std::vector<RankStep> rank_rows, measure_rank(reader, window, rank));
    rows.insert(rows.end(), rank_rows.begin(), rank_rows.end());
  }
  if (rows.empty()) {
    report.reason = "no forward/backward phase slices in the window";
    return report;
  }
  report.applicable = true;
  report.stages = stage_means(rows, *config);
  // Delays need each slice's chunk: not known under interleaving.
  if (report.schedule != memory::PipelineSchedule::kInterleaved) {
    measure_delays(rows, *config, report);
  }
  if (memory::splits_backward(report.schedule)) zero_bubble_theory(report);
  std::erase_if(report.stages, [](const StageBubble& st) { return st.samples == 0; });
  if (static_cast<int>(report.stages.size()) == report.pp) {
    RETURN_IF_ERROR(simulate_measured(report));
  }
  return report;
}

namespace {

double mean_impact(const PipelineBubbleReport& report) {
  double sum = 0;
  for (const StageBubble& st : report.stages) sum += st.step_ns > 0 ? st.bubble_ns / st.step_ns : 0;
  return report.stages.empty() ? 0 : sum / static_cast<double>(report.stages.size());
}

std::string bubble_advice(const PipelineBubbleReport& report) {
  const int p = report.pp, m = report.micro_batches, v = report.vpp;
  std::string advice = fmt::format(
      "raise the micro-batches per step (global batch / (dp x micro-batch), now {}): with {} the "
      "bubble is {:.0f}% of the ideal time",
      m, 4 * m, 100.0 * memory::bubble_fraction(report.schedule, p, 4 * m, v));
  if (memory::splits_backward(report.schedule)) return advice;  // already past interleaving
  // Interleaving, only where launch would run it: a layer or more per virtual stage, and the
  // micro-batches a multiple of p (Narayanan 2021 sec. 2.2's schedule).
  const int more_v = report.schedule == memory::PipelineSchedule::kInterleaved ? v + 1 : 2;
  if (report.layers >= static_cast<int64_t>(p) * more_v) {
    const std::string flags = report.schedule == memory::PipelineSchedule::kInterleaved
                                  ? fmt::format("--vpp {}", more_v)
                                  : std::string("--pp-schedule interleaved --vpp 2");
    advice += fmt::format("; or {}{} ({}): (p-1)/(v m) = {:.0f}%",
                          m % p == 0 ? "" : fmt::format("with micro-batches a multiple of {}, ", p),
                          report.schedule == memory::PipelineSchedule::kInterleaved
                              ? "more virtual stages"
                              : "interleave",
                          flags, 100.0 * (p - 1) / (more_v * static_cast<double>(m)));
  }
  if (report.mean_bubble_of_flush() > report.mean_simulated_bubble_of_flush() + 0.1) {
    advice += "; the stages wait longer than the schedule explains: look at p2p transfer time "
              "and stage imbalance (--pp-split)";
  }
  return advice;
}

}  // namespace

std::vector<Finding> pipeline_bubble_findings(const PipelineBubbleReport& report) {
  if (!report.applicable) return {};
  const double impact = mean_impact(report);
  if (impact < 0.05) return {};
  Finding f;
  f.kind = "pipeline_bubble";
  f.severity = impact >= 0.3 ? Severity::kCritical : impact >= 0.1 ? Severity::kWarning
                                                                     : Severity::kInfo;
  f.impact = impact;
  f.evidence = fmt::format(
      "{} with p = {}, m = {}{}: stages idle {:.1f}% of the pipeline flush (simulated "
      "{:.1f}%, theory {} = {:.1f}%), {:.1f}% of the step",
      memory::schedule_name(report.schedule), report.pp, report.micro_batches,
      report.vpp > 1 ? fmt::format(", v = {}", report.vpp) : std::string(),
      100 * report.mean_bubble_of_flush(), 100 * report.mean_simulated_bubble_of_flush(),
      memory::splits_backward(report.schedule) ? "with the measured F, B and W" : "(p-1)/(m+p-1)",
      100 * report.theory_bubble_of_flush, 100 * impact);
  f.advice = bubble_advice(report);
  return {f};
}

std::string format_pipeline_bubble(const PipelineBubbleReport& report) {
  if (!report.applicable) return fmt::format("Pipeline bubble: none ({})\n", report.reason);
  std::string out = fmt::format(
      "Pipeline bubble ({}, p = {}, m = {}{}; bubble = flush - busy; theory {} of ideal, "
      "{} of flush; simulated with {} per stage crossing, {} between actions)\n",
      memory::schedule_name(report.schedule), report.pp, report.micro_batches,
      report.vpp > 1 ? fmt::format(", v = {}", report.vpp) : std::string(),
      format_percent(report.theory_bubble_of_ideal), format_percent(report.theory_bubble_of_flush),
      format_duration(Nanoseconds(static_cast<int64_t>(report.transfer_ns))),
      format_duration(Nanoseconds(static_cast<int64_t>(report.gap_ns))));
  const bool split = memory::splits_backward(report.schedule);
  out += fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}{}\n",
                     "stage", "step", "flush", "busy", "bubble", "% flush", "sim %", "fwd", "bwd",
                     split ? fmt::format("  {:>10}", "wgt") : std::string());
  for (const StageBubble& st : report.stages) {
    auto ms = [](double ns) { return format_decimal(ns / 1e6, 2); };
    out += fmt::format(
        "{:>5}  {:>7} ms  {:>7} ms  {:>7} ms  {:>7} ms  {:>10}  {:>10}  {:>7} ms  {:>7} ms{}\n",
        st.stage, ms(st.step_ns), ms(st.flush_ns), ms(st.busy_ns), ms(st.bubble_ns),
        format_percent(st.bubble_of_flush), format_percent(st.simulated_bubble_of_flush),
        ms(st.forward_ns), ms(st.backward_ns),
        split ? fmt::format("  {:>7} ms", ms(st.weight_ns)) : std::string());
  }
  return out;
}

nlohmann::json pipeline_bubble_json(const PipelineBubbleReport& report) {
  nlohmann::json out = {{"applicable", report.applicable}};
  if (!report.applicable) {
    out["reason"] = report.reason;
    return out;
  }
  out["schedule"] = memory::schedule_name(report.schedule);
  out["pp"] = report.pp;
  out["vpp"] = report.vpp;
  out["micro_batches"] = report.micro_batches;
  out["theory_bubble_of_ideal"] = report.theory_bubble_of_ideal;
  out["theory_bubble_of_flush"] = report.theory_bubble_of_flush;
  out["simulated_flush_ms"] = report.simulated_flush_ns / 1e6;
  out["transfer_ms"] = report.transfer_ns / 1e6;
  out["gap_ms"] = report.gap_ns / 1e6;
  nlohmann::json stages = nlohmann::json::array();
  for (const StageBubble& st : report.stages) {
    stages.push_back({{"stage", st.stage},
                      {"samples", st.samples},
                      {"step_ms", st.step_ns / 1e6},
                      {"flush_ms", st.flush_ns / 1e6},
                      {"busy_ms", st.busy_ns / 1e6},
                      {"bubble_ms", st.bubble_ns / 1e6},
                      {"forward_ms", st.forward_ns / 1e6},
                      {"backward_ms", st.backward_ns / 1e6},
                      {"weight_ms", st.weight_ns / 1e6},
                      {"bubble_of_flush", st.bubble_of_flush},
                      {"bubble_of_ideal", st.bubble_of_ideal},
                      {"simulated_bubble_of_flush", st.simulated_bubble_of_flush},
                      {"simulated_bubble_of_ideal", st.simulated_bubble_of_ideal}});
  }
  out["stages"] = std::move(stages);
  return out;
}

}  // namespace partrain::analyzers
