#include "metrics/run_metrics.h"

#include <algorithm>
#include <string>

#include "analyzers/collective_stats.h"
#include "memory/category.h"

namespace partrain::metrics {
namespace {

constexpr double kNsPerSecond = 1e9;

double seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerSecond; }

MetricFamily family(std::string name, MetricType type, std::string unit, std::string help) {
  return MetricFamily{std::move(name), type, std::move(unit), std::move(help), {}};
}

Sample of_rank(int rank, double value) { return Sample{{{"rank", std::to_string(rank)}}, value}; }

void add_run_families(const analyzers::LiveRun& run, const RefreshCost& cost,
                      std::vector<MetricFamily>& out) {
  MetricFamily info = family("partrain_run", MetricType::kInfo, "",
                             "The run followed: its id and status (running, completed, failed, "
                             "killed, incomplete)");
  // A trace just created has no run row yet: no run to name.
  if (!run.run_id.empty()) {
    info.samples.push_back({{{"run_id", run.run_id}, {"status", run.status}}, 1});
  }
  out.push_back(std::move(info));
  MetricFamily world =
      family("partrain_world_size", MetricType::kGauge, "", "Ranks in the run (WORLD_SIZE)");
  if (run.world_size > 0) world.samples.push_back({{}, static_cast<double>(run.world_size)});
  out.push_back(std::move(world));
  // From the trace's own timeline, not this host's clock: on a node other than 0 the two differ
  // by the hosts' clock offset.
  MetricFamily traced = family("partrain_run_traced_seconds", MetricType::kGauge, "seconds",
                               "Time from the run's start to its latest record in the trace");
  if (run.start_ns > 0 && run.end_ns > run.start_ns) {
    traced.samples.push_back({{}, seconds(run.end_ns - run.start_ns)});
  }
  out.push_back(std::move(traced));
  MetricFamily tokens = family("partrain_run_tokens_per_second", MetricType::kGauge, "",
                               "Tokens per second of the whole run in the latest step every rank "
                               "finished (each token counted once)");
  if (run.tokens_per_s) tokens.samples.push_back({{}, *run.tokens_per_s});
  out.push_back(std::move(tokens));
  MetricFamily dropped = family("partrain_dropped_events", MetricType::kCounter, "",
                                "Events the trace lost (full buffers, a full disk, dropped "
                                "records), summed over its data-loss statistics");
  if (cost.trace_open) {
    dropped.samples.push_back({{}, static_cast<double>(run.data_loss_events)});
  }
  out.push_back(std::move(dropped));
  MetricFamily stopped = family("partrain_trace_stopped", MetricType::kGauge, "",
                                "1 once tracing stopped (a full disk, --trace-max-size): the run "
                                "goes on, but the figures read from the trace no longer change "
                                "and silence is no hang");
  if (cost.trace_open) stopped.samples.push_back({{}, run.trace_stopped ? 1.0 : 0.0});
  out.push_back(std::move(stopped));
}

void add_rank_families(const analyzers::LiveRun& run, const HangWatch& hang, int64_t now_ns,
                       std::vector<MetricFamily>& out) {
  MetricFamily step =
      family("partrain_step", MetricType::kGauge, "", "The rank's latest completed step");
  MetricFamily step_time = family("partrain_step_duration_seconds", MetricType::kGauge, "seconds",
                                  "Duration of the rank's latest completed step");
  MetricFamily split = family("partrain_step_activity_seconds", MetricType::kGauge, "seconds",
                              "The latest step split as `partrain analyze` splits it: compute, "
                              "exposed_comm, exposed_memcpy and idle add up to the step");
  MetricFamily tokens = family("partrain_tokens_per_second", MetricType::kGauge, "",
                               "Tokens per second of the rank's latest step (its data-parallel "
                               "replica's tokens over the step's duration)");
  MetricFamily loss = family("partrain_loss", MetricType::kGauge, "",
                             "Training loss of the rank's latest step that reported one");
  MetricFamily bytes = family("partrain_memory_bytes", MetricType::kGauge, "bytes",
                              "Memory in use now, per category of the tracked allocator");
  MetricFamily peak = family("partrain_memory_peak_bytes", MetricType::kGauge, "bytes",
                             "Peak memory in use so far, per category");
  MetricFamily quiet = family("partrain_rank_quiet_seconds", MetricType::kGauge, "seconds",
                              "Time since a new record of the rank last reached the trace");
  MetricFamily steps = family("partrain_steps", MetricType::kCounter, "",
                              "Steps the rank has completed (as read from the trace)");
  MetricFamily steps_time = family("partrain_step_seconds", MetricType::kCounter, "seconds",
                                   "Their durations summed: over partrain_steps_total's rate, the "
                                   "mean step time");
  const bool compute_known = analyzers::compute_recorded(run);
  for (const analyzers::RankStatus& rank : run.ranks) {
    if (rank.step) {
      step.samples.push_back(of_rank(rank.rank, static_cast<double>(*rank.step)));
      step_time.samples.push_back(of_rank(rank.rank, seconds(rank.step_ns)));
      steps.samples.push_back(of_rank(rank.rank, static_cast<double>(rank.steps_total)));
      steps_time.samples.push_back(of_rank(rank.rank, seconds(rank.steps_total_ns)));
    }
    if (rank.breakdown) {
      const analyzers::RankBreakdown& b = *rank.breakdown;
      const std::pair<const char*, int64_t> parts[] = {{"compute", b.compute_ns},
                                                       {"exposed_comm", b.exposed_comm_ns()},
                                                       {"exposed_memcpy", b.exposed_memcpy_ns()},
                                                       {"idle", b.idle_ns()}};
      for (const auto& [name, ns] : parts) {
        // Without compute recorded, compute, exposed comm and idle are unknown: no series (a
        // CPU job read 0 s of compute and 80% idle).
        if (!compute_known && std::string_view(name) != "exposed_memcpy") continue;
        split.samples.push_back(
            {{{"rank", std::to_string(rank.rank)}, {"activity", name}}, seconds(ns)});
      }
    }
    const auto marks = run.steps.find(rank.rank);
    if (marks != run.steps.end() && !marks->second.empty()) {
      const analyzers::StepMark& last = marks->second.back();
      if (last.tokens > 0 && last.dur_ns > 0) {
        tokens.samples.push_back(
            of_rank(rank.rank, static_cast<double>(last.tokens) / seconds(last.dur_ns)));
      }
    }
    if (rank.loss) loss.samples.push_back(of_rank(rank.rank, *rank.loss));
    const auto chart = run.memory.find(rank.rank);
    if (chart != run.memory.end()) {
      for (size_t c = 0; c < analyzers::kMemoryCategories; ++c) {
        const std::string category(memory::category_name(memory::kAllCategories[c]));
        const std::string rank_label = std::to_string(rank.rank);
        bytes.samples.push_back({{{"rank", rank_label}, {"category", category}},
                                 static_cast<double>(rank.memory_bytes[c])});
        peak.samples.push_back({{{"rank", rank_label}, {"category", category}},
                                static_cast<double>(chart->second.peak[c])});
      }
    }
    if (const auto ns = hang.quiet_ns(rank.rank, now_ns); ns && run.live) {
      quiet.samples.push_back(of_rank(rank.rank, seconds(*ns)));
    }
  }
  for (MetricFamily* f :
       {&step, &step_time, &steps, &steps_time, &split, &tokens, &loss, &bytes, &peak, &quiet}) {
    out.push_back(std::move(*f));
  }
}

// How each rank ended, as the trace's ranks table has it: a code for an exit, a signal for a kill
// (the table then has no code); a rank still running has neither, so no series.
void add_exit_families(const analyzers::LiveRun& run, std::vector<MetricFamily>& out) {
  MetricFamily code = family("partrain_rank_exit_code", MetricType::kGauge, "",
                             "The rank's exit status, once it exited (not killed by a signal)");
  MetricFamily signal = family("partrain_rank_exit_signal", MetricType::kGauge, "",
                               "The signal that ended the rank (9: SIGKILL), once one did");
  for (const analyzers::RankStatus& rank : run.ranks) {
    if (rank.exit_code) code.samples.push_back(of_rank(rank.rank, *rank.exit_code));
    // The table stores 0 for "no signal".
    if (rank.exit_signal.value_or(0) != 0) {
      signal.samples.push_back(of_rank(rank.rank, *rank.exit_signal));
    }
  }
  out.push_back(std::move(code));
  out.push_back(std::move(signal));
}

// Keeps its (comm, op) labels: the communicator, the op and, only where the caller gave one,
// what it is for.
std::vector<std::pair<std::string, std::string>> collective_labels(const std::string& comm,
                                                                   const std::string& op,
                                                                   const std::string& label) {
  std::vector<std::pair<std::string, std::string>> labels = {{"comm", comm}, {"op", op}};
  if (!label.empty()) labels.emplace_back("label", label);
  return labels;
}

void add_collective_totals(const analyzers::LiveRun& run, std::vector<MetricFamily>& out) {
  MetricFamily ops = family("partrain_collective_ops", MetricType::kCounter, "",
                            "Matched collectives of the communicator and op read so far");
  MetricFamily bytes = family("partrain_collective_bytes", MetricType::kCounter, "bytes",
                              "Their message sizes (nccl-tests' S) summed");
  for (const auto& [key, totals] : run.collective_totals) {
    const auto& [comm, op, label] = key;
    ops.samples.push_back({collective_labels(comm, op, label), static_cast<double>(totals.ops)});
    bytes.samples.push_back(
        {collective_labels(comm, op, label), static_cast<double>(totals.bytes)});
  }
  out.push_back(std::move(ops));
  out.push_back(std::move(bytes));
}

void add_collective_families(const LatestCollectives& latest, std::vector<MetricFamily>& out) {
  MetricFamily busbw =
      family("partrain_collective_busbw_bytes_per_second", MetricType::kGauge, "bytes_per_second",
             "Bus bandwidth of the latest matched collective of the communicator and op "
             "whose size is in the size_bucket_bytes bucket ([bucket, 2 x bucket) bytes, as "
             "`partrain analyze` groups them), as nccl-tests computes it");
  MetricFamily time = family("partrain_collective_duration_seconds", MetricType::kGauge, "seconds",
                             "Its time: the median member's duration");
  MetricFamily skew = family("partrain_collective_skew_seconds", MetricType::kGauge, "seconds",
                             "Its arrival skew: the last member's start minus the first's");
  MetricFamily size = family("partrain_collective_size_bytes", MetricType::kGauge, "bytes",
                             "Its message size (nccl-tests' S)");
  MetricFamily seq = family("partrain_collective_seq", MetricType::kGauge, "",
                            "Its sequence number on the communicator ((comm, seq) names it in "
                            "the trace)");
  for (const auto& [key, c] : latest) {
    auto labels = collective_labels(c.comm_id, c.op, c.label);
    labels.emplace_back("size_bucket_bytes", std::to_string(std::get<3>(key)));
    if (c.busbw_gbps) busbw.samples.push_back({labels, *c.busbw_gbps * 1e9});
    time.samples.push_back({labels, seconds(c.time_ns)});
    skew.samples.push_back({labels, seconds(c.skew_ns)});
    size.samples.push_back({labels, static_cast<double>(c.bytes)});
    seq.samples.push_back({labels, static_cast<double>(c.seq)});
  }
  for (MetricFamily* f : {&busbw, &time, &skew, &size, &seq}) out.push_back(std::move(*f));
}

void add_health_families(const analyzers::LiveRun& run, const HangWatch& watch, int64_t now_ns,
                         std::vector<MetricFamily>& out) {
  MetricFamily straggler = family("partrain_straggler", MetricType::kGauge, "",
                                  "1 for the rank `partrain analyze` names the straggler in the "
                                  "latest analysis window, 0 for the others");
  MetricFamily wait =
      family("partrain_straggler_wait_per_step_seconds", MetricType::kGauge, "seconds",
             "How long the rank made the others wait per step (the straggler "
             "score)");
  if (const auto& report = run.analysis.report) {
    const std::optional<int> named = report->stragglers.straggler;
    for (const analyzers::RankLateness& rank : report->stragglers.ranks) {
      straggler.samples.push_back(of_rank(rank.rank, named == rank.rank ? 1 : 0));
      wait.samples.push_back(of_rank(rank.rank, rank.wait_per_step_ms / 1e3));
    }
  }
  const analyzers::HangState hang = watch.state(run, now_ns);
  MetricFamily hung = family("partrain_hang", MetricType::kGauge, "",
                             "1 when the run looks hung: the flight recorder diagnosed a hang "
                             "or desync, or no rank has recorded anything for "
                             "partrain_hang_threshold_seconds");
  MetricFamily culprit = family("partrain_hang_culprit", MetricType::kGauge, "",
                                "1 for the rank holding the others up, while partrain_hang is 1 "
                                "and one can be named");
  MetricFamily threshold = family("partrain_hang_threshold_seconds", MetricType::kGauge, "seconds",
                                  "The silence after which the run counts as hung");
  if (!run.ranks.empty()) {
    hung.samples.push_back({{}, hang.hung ? 1.0 : 0.0});
    threshold.samples.push_back({{}, seconds(hang.threshold_ns)});
  }
  if (hang.hung && hang.culprit) culprit.samples.push_back(of_rank(*hang.culprit, 1));
  for (MetricFamily* f : {&straggler, &wait, &hung, &culprit, &threshold}) {
    out.push_back(std::move(*f));
  }
}

// The latest analysis window's expert load per MoE layer (analyzers/expert_load.h).
void add_expert_families(const analyzers::LiveRun& run, std::vector<MetricFamily>& out) {
  MetricFamily ratio = family("partrain_moe_load_ratio", MetricType::kGauge, "",
                              "Max over mean of a MoE layer's token assignments per step, "
                              "averaged over the latest analysis window: over its experts, and "
                              "over the ep ranks that hold them when the run's ep is known (the "
                              "expert phase runs at the most loaded ep rank's pace)");
  MetricFamily dropped = family("partrain_moe_dropped_tokens_ratio", MetricType::kGauge, "",
                                "Share of the layer's token assignments dropped for want of "
                                "capacity in the window");
  MetricFamily hottest = family("partrain_moe_hottest_expert_tokens_ratio", MetricType::kGauge, "",
                                "Share of the layer's token assignments its hottest expert got "
                                "in the window (the expert label names it)");
  MetricFamily assigned = family("partrain_moe_assignments_per_step", MetricType::kGauge, "",
                                 "Token-to-expert assignments the layer's router made per step "
                                 "(top-k counts a token k times)");
  MetricFamily aux = family("partrain_moe_aux_loss", MetricType::kGauge, "",
                            "The layer's load-balancing auxiliary loss, averaged over the window");
  if (const auto& report = run.analysis.report; report && report->experts.applicable) {
    for (const analyzers::ExpertLayerBalance& l : report->experts.layers) {
      const std::string layer = std::to_string(l.layer);
      ratio.samples.push_back({{{"layer", layer}, {"over", "experts"}}, l.expert_ratio});
      if (l.ep_ratio)
        ratio.samples.push_back({{{"layer", layer}, {"over", "ep_ranks"}}, *l.ep_ratio});
      dropped.samples.push_back({{{"layer", layer}}, l.dropped_share});
      hottest.samples.push_back(
          {{{"layer", layer}, {"expert", std::to_string(l.hottest_expert)}}, l.hottest_share});
      assigned.samples.push_back({{{"layer", layer}}, l.routed_per_step});
      if (l.aux_loss) aux.samples.push_back({{{"layer", layer}}, *l.aux_loss});
    }
  }
  for (MetricFamily* f : {&ratio, &dropped, &hottest, &assigned, &aux})
    out.push_back(std::move(*f));
}

void add_exporter_families(const analyzers::LiveRun& run, const RefreshCost& cost,
                           std::vector<MetricFamily>& out) {
  MetricFamily refresh =
      family("partrain_metrics_refresh_duration_seconds", MetricType::kGauge, "seconds",
             "How long the exporter's latest refresh took (reading the trace, "
             "rendering), off the training processes");
  refresh.samples.push_back({{}, seconds(cost.refresh_ns)});
  out.push_back(std::move(refresh));
  MetricFamily refreshes = family("partrain_metrics_refreshes", MetricType::kCounter, "",
                                  "Refreshes of the page so far");
  refreshes.samples.push_back({{}, static_cast<double>(cost.refreshes)});
  out.push_back(std::move(refreshes));
  MetricFamily analysis = family("partrain_analysis_duration_seconds", MetricType::kGauge,
                                 "seconds", "How long the latest run of the analyses took");
  if (run.analysis.report) analysis.samples.push_back({{}, seconds(run.analysis.computed_ns)});
  out.push_back(std::move(analysis));
}

}  // namespace

void RunMetrics::observe(const analyzers::LiveRun& run, int64_t now_ns) {
  for (const analyzers::MatchedCollective& c : run.collectives) {
    auto [it, inserted] =
        latest_.try_emplace({c.comm_id, c.op, c.label, analyzers::size_bucket(c.bytes)}, c);
    if (!inserted && c.seq > it->second.seq) it->second = c;
  }
  const int64_t stale_ns = std::max(kCollectiveStaleFloorNs,
                                    analyzers::kHangQuietSteps * analyzers::slowest_step_ns(run));
  std::erase_if(latest_,
                [&](const auto& entry) { return run.end_ns - entry.second.end_ns > stale_ns; });
  hang_.observe(run, now_ns);
}

std::vector<MetricFamily> RunMetrics::families(const analyzers::LiveRun& run, int64_t now_ns,
                                               const RefreshCost& cost) const {
  std::vector<MetricFamily> out;
  add_run_families(run, cost, out);
  add_rank_families(run, hang_, now_ns, out);
  add_exit_families(run, out);
  add_collective_families(latest_, out);
  add_collective_totals(run, out);
  add_health_families(run, hang_, now_ns, out);
  add_expert_families(run, out);
  add_exporter_families(run, cost, out);
  return out;
}

}  // namespace partrain::metrics
