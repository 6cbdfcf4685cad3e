#include "metrics/run_metrics.h"

#include <gtest/gtest.h>

#include <optional>

#include "analyzers/collective_stats.h"

namespace partrain::metrics {
namespace {

using analyzers::kHangQuietFloorNs;

constexpr int64_t kMs = 1'000'000;

const MetricFamily* find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The value of `name` whose labels include every pair of `labels`.
std::optional<double> value(const std::vector<MetricFamily>& families, const std::string& name,
                            std::vector<std::pair<std::string, std::string>> labels = {}) {
  const MetricFamily* f = find(families, name);
  if (f == nullptr) return std::nullopt;
  for (const Sample& s : f->samples) {
    bool all = true;
    for (const auto& label : labels) {
      bool found = false;
      for (const auto& have : s.labels) found = found || have == label;
      all = all && found;
    }
    if (all) return s.value;
  }
  return std::nullopt;
}

analyzers::MatchedCollective matched(std::string comm, std::string op, int64_t seq,
                                     double busbw_gbps) {
  analyzers::MatchedCollective c;
  c.comm_id = std::move(comm);
  c.op = std::move(op);
  c.seq = seq;
  c.bytes = 1 << 20;
  c.group_size = 2;
  c.time_ns = 2 * kMs;
  c.skew_ns = kMs / 2;
  c.busbw_gbps = busbw_gbps;
  return c;
}

analyzers::LiveRun two_rank_run() {
  analyzers::LiveRun run;
  run.run_id = "r1";
  run.status = "running";
  run.live = true;
  run.world_size = 2;
  run.start_ns = 1'000 * kMs;
  run.end_ns = 4'000 * kMs;
  run.tokens_per_s = 4096;
  run.data_loss_events = 3;
  for (int r = 0; r < 2; ++r) {
    analyzers::RankStatus& row = analyzers::rank_row(run, r);
    row.step = 9;
    row.step_ns = (100 + 50 * r) * kMs;
    row.loss = 2.5;
    row.last_event_ns = 1'000 * kMs;
    analyzers::RankBreakdown b;
    b.window_ns = row.step_ns;
    b.compute_ns = 60 * kMs;
    b.comm_ns = 30 * kMs;
    b.overlap_ns = 10 * kMs;
    b.compute_or_comm_ns = 80 * kMs;
    b.busy_ns = 85 * kMs;
    row.breakdown = b;
    run.steps[r].push_back({9, 0, row.step_ns, 2048});
    analyzers::add_memory_sample(run, r, 10, 0, 4096);        // params
    analyzers::add_memory_sample(run, r, 20, 3, 1 << 20);     // activations, peak
    analyzers::add_memory_sample(run, r, 5'000, 3, 1 << 10);  // activations now
  }
  run.collectives.push_back(matched("world", "all_reduce", 4, 1.5));
  run.collectives.push_back(matched("world", "all_reduce", 5, 2.5));
  run.collectives.push_back(matched("tp0", "all_gather", 2, 0.5));
  return run;
}

TEST(RunMetrics, PerRankFiguresInBaseUnits) {
  const analyzers::LiveRun run = two_rank_run();
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, RefreshCost{7 * kMs, 4, true});
  EXPECT_EQ(value(f, "partrain_step", {{"rank", "1"}}), 9);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_step_duration_seconds", {{"rank", "1"}}), 0.15);
  // 2048 tokens in 0.15 s.
  EXPECT_DOUBLE_EQ(*value(f, "partrain_tokens_per_second", {{"rank", "1"}}), 2048 / 0.15);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_run_tokens_per_second"), 4096);
  // The split adds up to the step: 60 compute, 20 exposed comm, 5 memcpy, 15 idle (ms).
  const char* activities[] = {"compute", "exposed_comm", "exposed_memcpy", "idle"};
  const double expected[] = {0.060, 0.020, 0.005, 0.015};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(
        *value(f, "partrain_step_activity_seconds", {{"rank", "0"}, {"activity", activities[i]}}),
        expected[i], 1e-12)
        << activities[i];
  }
  EXPECT_EQ(value(f, "partrain_memory_bytes", {{"rank", "0"}, {"category", "params"}}), 4096);
  EXPECT_EQ(value(f, "partrain_memory_bytes", {{"rank", "0"}, {"category", "activations"}}), 1024);
  EXPECT_EQ(value(f, "partrain_memory_peak_bytes", {{"rank", "0"}, {"category", "activations"}}),
            1 << 20);
  EXPECT_EQ(value(f, "partrain_dropped_events"), 3);
  EXPECT_EQ(find(f, "partrain_dropped_events")->type, MetricType::kCounter);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_metrics_refresh_duration_seconds"), 0.007);
  EXPECT_EQ(value(f, "partrain_run", {{"run_id", "r1"}, {"status", "running"}}), 1);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_run_traced_seconds"), 3.0);
}

TEST(RunMetrics, BusbwPerCommunicatorAndOpIsTheLatestMatchedOneInBytesPerSecond) {
  analyzers::LiveRun run = two_rank_run();
  RunMetrics metrics;
  metrics.observe(run, 0);
  auto f = metrics.families(run, 0, {});
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_busbw_bytes_per_second",
                          {{"comm", "world"}, {"op", "all_reduce"}}),
                   2.5e9);
  EXPECT_EQ(value(f, "partrain_collective_seq", {{"comm", "world"}, {"op", "all_reduce"}}), 5);
  EXPECT_DOUBLE_EQ(
      *value(f, "partrain_collective_duration_seconds", {{"comm", "tp0"}, {"op", "all_gather"}}),
      0.002);
  EXPECT_EQ(find(f, "partrain_collective_busbw_bytes_per_second")->samples.size(), 2u);
  // The run's recent collectives move on without tp0's: its latest stays on the page.
  run.collectives.clear();
  run.collectives.push_back(matched("world", "all_reduce", 6, 3.0));
  metrics.observe(run, 1);
  f = metrics.families(run, 1, {});
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_busbw_bytes_per_second",
                          {{"comm", "world"}, {"op", "all_reduce"}}),
                   3e9);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_busbw_bytes_per_second",
                          {{"comm", "tp0"}, {"op", "all_gather"}}),
                   0.5e9);
}

// A DDP step all-reduces its gradient bucket, then the 4-byte loss, on one communicator: each
// has its series, in analyze's size buckets. Keyed by (comm, op) alone, the loss came last in
// every step and the page showed only its 4 B and busbw of a few kB/s, never the bucket's.
TEST(RunMetrics, CollectivesOfOneOpAndDifferentSizesAreSeriesPerSizeBucket) {
  analyzers::LiveRun run = two_rank_run();
  run.collectives.clear();
  for (int64_t step = 0; step < 3; ++step) {
    analyzers::MatchedCollective bucket = matched("default_pg:0", "all_reduce", 2 * step, 5.0);
    bucket.bytes = 132 * 1024;
    analyzers::MatchedCollective loss = matched("default_pg:0", "all_reduce", 2 * step + 1, 1e-6);
    loss.bytes = 4;
    run.collectives.push_back(bucket);
    run.collectives.push_back(loss);
  }
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, {});
  const std::string bucket = std::to_string(analyzers::size_bucket(132 * 1024));
  EXPECT_EQ(bucket, "131072");
  EXPECT_EQ(value(f, "partrain_collective_size_bytes",
                  {{"op", "all_reduce"}, {"size_bucket_bytes", bucket}}),
            132 * 1024);
  EXPECT_EQ(value(f, "partrain_collective_seq", {{"size_bucket_bytes", bucket}}), 4);
  EXPECT_EQ(value(f, "partrain_collective_busbw_bytes_per_second", {{"size_bucket_bytes", bucket}}),
            5e9);
  EXPECT_EQ(value(f, "partrain_collective_size_bytes", {{"size_bucket_bytes", "4"}}), 4);
  EXPECT_EQ(value(f, "partrain_collective_seq", {{"size_bucket_bytes", "4"}}), 5);
  EXPECT_EQ(find(f, "partrain_collective_size_bytes")->samples.size(), 2u);
}

// Which rank died, and how: the ranks table's exit code and signal per rank (a SIGKILLed rank 1
// has a signal and no code). Before, only partrain_run_info's status="failed" said anything.
TEST(RunMetrics, HowEachRankEndedIsASeriesPerRank) {
  analyzers::LiveRun run = two_rank_run();
  RunMetrics metrics;
  metrics.observe(run, 0);
  auto f = metrics.families(run, 0, {});
  ASSERT_NE(find(f, "partrain_rank_exit_code"), nullptr);
  ASSERT_NE(find(f, "partrain_rank_exit_signal"), nullptr);
  EXPECT_TRUE(find(f, "partrain_rank_exit_code")->samples.empty());  // both still running
  EXPECT_TRUE(find(f, "partrain_rank_exit_signal")->samples.empty());
  run.status = "failed";
  run.ranks[0].exit_code = 0;
  run.ranks[0].exit_signal = 0;  // the table's "no signal"
  run.ranks[1].exit_signal = 9;
  metrics.observe(run, 1);
  f = metrics.families(run, 1, {});
  EXPECT_EQ(value(f, "partrain_rank_exit_code", {{"rank", "0"}}), 0);
  EXPECT_FALSE(value(f, "partrain_rank_exit_code", {{"rank", "1"}}));
  EXPECT_EQ(value(f, "partrain_rank_exit_signal", {{"rank", "1"}}), 9);
  EXPECT_FALSE(value(f, "partrain_rank_exit_signal", {{"rank", "0"}}));
  EXPECT_EQ(find(f, "partrain_rank_exit_signal")->type, MetricType::kGauge);
}

// A job whose compute no rank recorded (a PyTorch job on the CPU): its steps' compute, exposed
// communication and idle are unknown, so they have no series; a CPU job read 0 s of compute and
// 80% idle on a dashboard.
TEST(RunMetrics, WithoutRecordedComputeTheStepSplitHasNoComputeOrIdle) {
  analyzers::LiveRun run = two_rank_run();
  for (analyzers::RankStatus& row : run.ranks) {
    row.breakdown->compute_ns = 0;
    row.breakdown->overlap_ns = 0;
  }
  RunMetrics metrics;
  metrics.observe(run, 0);
  auto f = metrics.families(run, 0, {});
  for (const char* activity : {"compute", "exposed_comm", "idle"}) {
    EXPECT_FALSE(value(f, "partrain_step_activity_seconds", {{"activity", activity}})) << activity;
  }
  EXPECT_TRUE(value(f, "partrain_step_activity_seconds", {{"activity", "exposed_memcpy"}}));
  // With compute on a rank, every part is there.
  auto known = metrics.families(two_rank_run(), 0, {});
  EXPECT_DOUBLE_EQ(
      *value(known, "partrain_step_activity_seconds", {{"rank", "0"}, {"activity", "compute"}}),
      0.06);
}

// A barrier moves no bytes: it has a duration and a skew but no busbw series (absent, not a
// bandwidth of 0 B/s), as analyze's table gives it '-' and null.
TEST(RunMetrics, ABarrierHasNoBusbwSeries) {
  analyzers::LiveRun run = two_rank_run();
  analyzers::MatchedCollective barrier = matched("world", "barrier", 7, 0);
  barrier.bytes = 0;
  barrier.busbw_gbps.reset();
  run.collectives.push_back(barrier);
  RunMetrics metrics;
  metrics.observe(run, 0);
  auto f = metrics.families(run, 0, {});
  EXPECT_FALSE(value(f, "partrain_collective_busbw_bytes_per_second", {{"op", "barrier"}}));
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_duration_seconds", {{"op", "barrier"}}), 0.002);
}

// A mixture of experts' dispatch and combine all_to_all share communicator and op: their labels
// keep them two series.
TEST(RunMetrics, LabelledCollectivesAreSeriesOfTheirOwn) {
  analyzers::LiveRun run = two_rank_run();
  run.collectives.clear();
  analyzers::MatchedCollective dispatch = matched("ep", "all_to_all", 8, 4.0);
  dispatch.label = "moe_dispatch";
  analyzers::MatchedCollective combine = matched("ep", "all_to_all", 9, 1.0);
  combine.label = "moe_combine";
  run.collectives = {dispatch, combine};
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, {});
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_busbw_bytes_per_second",
                          {{"comm", "ep"}, {"op", "all_to_all"}, {"label", "moe_dispatch"}}),
                   4e9);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_collective_busbw_bytes_per_second",
                          {{"comm", "ep"}, {"op", "all_to_all"}, {"label", "moe_combine"}}),
                   1e9);
  EXPECT_EQ(find(f, "partrain_collective_busbw_bytes_per_second")->samples.size(), 2u);
}

TEST(RunMetrics, StragglerIsOneForTheNamedRankZeroForTheOthers) {
  analyzers::LiveRun run = two_rank_run();
  analyzers::AnalysisReport report;
  report.stragglers.ranks.resize(2);
  report.stragglers.ranks[0].rank = 0;
  report.stragglers.ranks[1].rank = 1;
  report.stragglers.ranks[1].wait_per_step_ms = 12;
  report.stragglers.straggler = 1;
  run.analysis.report = report;
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, {});
  EXPECT_EQ(value(f, "partrain_straggler", {{"rank", "0"}}), 0);
  EXPECT_EQ(value(f, "partrain_straggler", {{"rank", "1"}}), 1);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_straggler_wait_per_step_seconds", {{"rank", "1"}}), 0.012);
  EXPECT_EQ(value(f, "partrain_hang"), 0);
  EXPECT_TRUE(find(f, "partrain_hang_culprit")->samples.empty());
}

// The latest analysis window's expert load, per MoE layer; a dense run's page has none of it.
TEST(RunMetrics, ExpertLoadPerLayerFromTheLatestAnalysis) {
  analyzers::LiveRun run = two_rank_run();
  analyzers::AnalysisReport report;
  report.experts.applicable = true;
  report.experts.ep = 2;
  analyzers::ExpertLayerBalance layer;
  layer.layer = 3;
  layer.experts = 8;
  layer.routed_per_step = 4096;
  layer.expert_ratio = 1.75;
  layer.ep_ratio = 1.3;
  layer.dropped_share = 0.02;
  layer.hottest_expert = 5;
  layer.hottest_share = 0.25;
  layer.aux_loss = 0.011;
  report.experts.layers.push_back(layer);
  layer.layer = 4;
  layer.ep_ratio.reset();
  layer.aux_loss.reset();
  report.experts.layers.push_back(layer);
  run.analysis.report = report;
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, {});
  EXPECT_EQ(value(f, "partrain_moe_load_ratio", {{"layer", "3"}, {"over", "experts"}}), 1.75);
  EXPECT_EQ(value(f, "partrain_moe_load_ratio", {{"layer", "3"}, {"over", "ep_ranks"}}), 1.3);
  EXPECT_EQ(value(f, "partrain_moe_load_ratio", {{"layer", "4"}, {"over", "ep_ranks"}}),
            std::nullopt);
  EXPECT_EQ(value(f, "partrain_moe_dropped_tokens_ratio", {{"layer", "3"}}), 0.02);
  EXPECT_EQ(value(f, "partrain_moe_hottest_expert_tokens_ratio", {{"layer", "3"}, {"expert", "5"}}),
            0.25);
  EXPECT_EQ(value(f, "partrain_moe_assignments_per_step", {{"layer", "4"}}), 4096);
  EXPECT_EQ(value(f, "partrain_moe_aux_loss", {{"layer", "3"}}), 0.011);
  EXPECT_EQ(find(f, "partrain_moe_aux_loss")->samples.size(), 1u);

  run.analysis.report = analyzers::AnalysisReport{};  // a dense run: not applicable
  const auto dense = metrics.families(run, 0, {});
  for (const char* name : {"partrain_moe_load_ratio", "partrain_moe_dropped_tokens_ratio",
                           "partrain_moe_hottest_expert_tokens_ratio"}) {
    ASSERT_NE(find(dense, name), nullptr) << name;
    EXPECT_TRUE(find(dense, name)->samples.empty()) << name;
  }
}

TEST(RunMetrics, HangFlagAndCulprit) {
  analyzers::LiveRun run = two_rank_run();
  run.ranks[0].last_event_ns = 3'000 * kMs;  // rank 1 stopped 2 s (steps of 150 ms) before
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, kHangQuietFloorNs, {});
  EXPECT_EQ(value(f, "partrain_hang"), 1);
  EXPECT_EQ(value(f, "partrain_hang_culprit", {{"rank", "1"}}), 1);
  EXPECT_EQ(find(f, "partrain_hang_culprit")->samples.size(), 1u);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_rank_quiet_seconds", {{"rank", "0"}}),
                   kHangQuietFloorNs / 1e9);
}

// Tracing stopped: the page says its figures are stale, and the silence is no hang.
TEST(RunMetrics, AStoppedTraceIsSaidAndItsSilenceIsNoHang) {
  analyzers::LiveRun run = two_rank_run();
  RunMetrics metrics;
  metrics.observe(run, 0);
  EXPECT_EQ(value(metrics.families(run, 0, RefreshCost{0, 1, true}), "partrain_trace_stopped"), 0);
  run.trace_stopped = true;
  const auto f = metrics.families(run, 10 * kHangQuietFloorNs, RefreshCost{0, 1, true});
  EXPECT_EQ(value(f, "partrain_trace_stopped"), 1);
  EXPECT_EQ(value(f, "partrain_hang"), 0);
  EXPECT_TRUE(find(f, "partrain_hang_culprit")->samples.empty());
}

// A (comm, op) the run stopped using leaves the page once the trace has gone on a staleness
// window without it; an op of every step stays. Before, the rendezvous' 16 B all_gather kept its
// busbw of bytes per second on the page for the whole run.
TEST(RunMetrics, ACollectiveNotSeenForAWhileLeavesThePage) {
  analyzers::LiveRun run = two_rank_run();
  run.collectives.back().end_ns = 1'000 * kMs;  // tp0's all_gather, at the start
  for (analyzers::MatchedCollective& c : run.collectives) {
    if (c.comm_id == "world") c.end_ns = 3'900 * kMs;
  }
  RunMetrics metrics;
  metrics.observe(run, 0);
  auto f = metrics.families(run, 0, {});
  EXPECT_TRUE(value(f, "partrain_collective_seq", {{"comm", "tp0"}, {"op", "all_gather"}}));
  // The run goes on: world's all_reduce keeps coming, tp0's all_gather never again.
  run.collectives.clear();
  analyzers::MatchedCollective again = matched("world", "all_reduce", 900, 2.5);
  again.end_ns = 1'000 * kMs + kCollectiveStaleFloorNs + 1;
  run.collectives.push_back(again);
  run.end_ns = again.end_ns;
  metrics.observe(run, 1);
  f = metrics.families(run, 1, {});
  EXPECT_FALSE(value(f, "partrain_collective_seq", {{"comm", "tp0"}, {"op", "all_gather"}}));
  EXPECT_FALSE(value(f, "partrain_collective_busbw_bytes_per_second", {{"comm", "tp0"}}));
  EXPECT_EQ(value(f, "partrain_collective_seq", {{"comm", "world"}, {"op", "all_reduce"}}), 900);
  // Slow steps widen the window: 10 steps of 10 s.
  RunMetrics slow;
  run = two_rank_run();
  run.collectives.back().end_ns = 1'000 * kMs;
  run.ranks[0].step_ns = 10'000 * kMs;
  run.end_ns = 1'000 * kMs + kCollectiveStaleFloorNs + 1;
  slow.observe(run, 0);
  EXPECT_TRUE(value(slow.families(run, 0, {}), "partrain_collective_seq", {{"comm", "tp0"}}));
}

// Counters to rate(): steps and their time per rank, collectives and their bytes per comm and op.
TEST(RunMetrics, CountersOfStepsAndCollectives) {
  analyzers::LiveRun run = two_rank_run();
  run.ranks[1].steps_total = 10;
  run.ranks[1].steps_total_ns = 1'500 * kMs;
  run.collective_totals[{"world", "all_reduce", ""}] = {7, 7 << 20};
  run.collective_totals[{"ep", "all_to_all", "moe_dispatch"}] = {2, 4096};
  RunMetrics metrics;
  metrics.observe(run, 0);
  const auto f = metrics.families(run, 0, {});
  EXPECT_EQ(find(f, "partrain_steps")->type, MetricType::kCounter);
  EXPECT_EQ(value(f, "partrain_steps", {{"rank", "1"}}), 10);
  EXPECT_DOUBLE_EQ(*value(f, "partrain_step_seconds", {{"rank", "1"}}), 1.5);
  EXPECT_EQ(value(f, "partrain_collective_ops", {{"comm", "world"}, {"op", "all_reduce"}}), 7);
  EXPECT_EQ(value(f, "partrain_collective_bytes", {{"comm", "world"}, {"op", "all_reduce"}}),
            7 << 20);
  EXPECT_EQ(value(f, "partrain_collective_ops", {{"comm", "ep"}, {"label", "moe_dispatch"}}), 2);
  EXPECT_EQ(find(f, "partrain_collective_bytes")->type, MetricType::kCounter);
}

TEST(RunMetrics, BeforeTheTraceExistsOnlyTheExportersOwnFigures) {
  RunMetrics metrics;
  const auto f = metrics.families(analyzers::LiveRun{}, 0, RefreshCost{});
  for (const MetricFamily& family : f) {
    const bool own = family.name.rfind("partrain_metrics_", 0) == 0;
    EXPECT_EQ(!family.samples.empty(), own) << family.name;
  }
}

// The collector creates the file before it writes the run's row: a page read then names no run
// (an empty run_id would be a series of its own).
TEST(RunMetrics, ATraceWithoutItsRunRowNamesNoRun) {
  analyzers::LiveRun run;
  run.status = "running";
  RunMetrics metrics;
  const auto f = metrics.families(run, 0, RefreshCost{0, 1, true});
  EXPECT_TRUE(find(f, "partrain_run")->samples.empty());
  EXPECT_TRUE(find(f, "partrain_world_size")->samples.empty());
  EXPECT_EQ(value(f, "partrain_dropped_events"), 0);
}

// Names follow Prometheus' conventions: snake_case, the partrain_ prefix, a unit suffix when a
// unit is given, and counters not ending in _total (the format adds it).
TEST(RunMetrics, NamesFollowPrometheusConventions) {
  const analyzers::LiveRun run = two_rank_run();
  RunMetrics metrics;
  metrics.observe(run, 0);
  for (const MetricFamily& f : metrics.families(run, 0, {})) {
    EXPECT_EQ(f.name.rfind("partrain_", 0), 0u) << f.name;
    EXPECT_EQ(f.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << f.name;
    if (!f.unit.empty()) {
      EXPECT_TRUE(f.name.ends_with("_" + f.unit)) << f.name;
    }
    EXPECT_FALSE(f.name.ends_with("_total")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
}

}  // namespace
}  // namespace partrain::metrics
