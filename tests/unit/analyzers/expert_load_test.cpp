// The expert-load analysis over synthetic traces written by the real TraceWriter: per layer the
// max/mean load over experts and over ep ranks, the dropped share and the hottest expert
// (hand-computed below), and the expert_imbalance finding raised for an imbalanced router and
// not for a balanced one.
#include "analyzers/expert_load.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "analyzers/analysis_report.h"
#include "tests/support/trace_query.h"
#include "tests/unit/analyzers/workload_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using profiler::ExpertLoadRecord;
using profiler::TraceEvent;
using testing::step_event;
using testing::window_of;

// A config with the layout's ep, as `partrain launch` writes it (the model part does not matter
// to the expert analysis).
std::string config_with_ep(int ep) {
  return fmt::format(R"({{"workload":"gpt","layout":{{"world":4,"ep":{}}}}})", ep);
}

ExpertLoadRecord load(int rank, int64_t step, int layer, std::vector<int64_t> tokens,
                      int64_t dropped = 0, double aux_loss = 0.01) {
  return ExpertLoadRecord{rank, step, layer, std::move(tokens), dropped, aux_loss};
}

class ExpertLoadTest : public testing::WorkloadTraceTest {
 protected:
  // Steps 1..3 of 4 ranks, each 100 ms, and the given records.
  profiler::TraceFile trace(const std::string& config, std::vector<TraceEvent> records) {
    std::vector<TraceEvent> events;
    for (int rank = 0; rank < 4; ++rank) {
      for (int64_t step = 1; step <= 3; ++step) {
        events.push_back(step_event(rank, step, 100.0 * step, 100.0 * step + 90));
      }
    }
    for (TraceEvent& r : records) events.push_back(std::move(r));
    return partrain::testing::write_completed_trace(dir_ / fmt::format("trace{}.db", traces_++),
                                                    config, 4, std::move(events));
  }
  int traces_ = 0;
};

const Finding* find_kind(const std::vector<Finding>& findings, std::string_view kind) {
  for (const Finding& f : findings) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

TEST_F(ExpertLoadTest, BalancedRoutingRaisesNothing) {
  std::vector<TraceEvent> records;
  for (int64_t step = 1; step <= 3; ++step) {
    for (int rank = 0; rank < 4; ++rank) records.push_back(load(rank, step, 1, {64, 64, 64, 64}));
  }
  auto file = trace(config_with_ep(2), std::move(records));
  auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_TRUE(report->applicable);
  EXPECT_EQ(report->ep, 2);
  ASSERT_EQ(report->layers.size(), 1u);
  const ExpertLayerBalance& l = report->layers[0];
  EXPECT_EQ(l.steps, 2);
  EXPECT_DOUBLE_EQ(l.routed_per_step, 256);
  EXPECT_DOUBLE_EQ(l.expert_ratio, 1.0);
  ASSERT_TRUE(l.ep_ratio.has_value());
  EXPECT_DOUBLE_EQ(*l.ep_ratio, 1.0);
  EXPECT_DOUBLE_EQ(l.dropped_share, 0);
  EXPECT_TRUE(expert_load_findings(*report).empty());
}

// Layer 1 on ep 2 (experts 0-1 on ep rank 0, 2-3 on ep rank 1):
//   step 2: {100, 60, 20, 20}: experts max/mean 100/50 = 2.0, ranks 160/100 = 1.6
//   step 3: {70, 50, 40, 40}:  experts 70/50 = 1.4, ranks 120/100 = 1.2
// means: experts 1.7, ranks 1.4 (worst 1.6 at step 2); expert 0 has 170 of 400 = 42.5%.
// Step 1 (the warm-up, outside the window) is wildly off and must not count; rank 1's records
// of the same layer differ and must not be read (the lowest rank's are).
TEST_F(ExpertLoadTest, ImbalancedRoutingIsMeasuredPerEpRankAndRaised) {
  auto file = trace(config_with_ep(2),
                    {load(0, 1, 1, {400, 0, 0, 0}), load(0, 2, 1, {100, 60, 20, 20}, 4, 0.02),
                     load(0, 3, 1, {70, 50, 40, 40}, 0, 0.04), load(1, 2, 1, {50, 50, 50, 50}),
                     load(1, 3, 1, {50, 50, 50, 50})});
  auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->layers.size(), 1u);
  const ExpertLayerBalance& l = report->layers[0];
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.experts, 4);
  EXPECT_DOUBLE_EQ(l.expert_ratio, 1.7);
  EXPECT_DOUBLE_EQ(l.expert_ratio_worst, 2.0);
  EXPECT_EQ(l.expert_worst_step, 2);
  ASSERT_TRUE(l.ep_ratio.has_value());
  EXPECT_DOUBLE_EQ(*l.ep_ratio, 1.4);
  EXPECT_DOUBLE_EQ(*l.ep_ratio_worst, 1.6);
  EXPECT_EQ(l.ep_worst_step, 2);
  EXPECT_EQ(l.busiest_ep_rank, 0);
  EXPECT_EQ(l.hottest_expert, 0);
  EXPECT_DOUBLE_EQ(l.hottest_share, 0.425);
  EXPECT_DOUBLE_EQ(l.dropped_share, 4.0 / 400);
  ASSERT_TRUE(l.aux_loss.has_value());
  EXPECT_DOUBLE_EQ(*l.aux_loss, 0.03);

  const std::vector<Finding> findings = expert_load_findings(*report);
  const Finding* f = find_kind(findings, "expert_imbalance");
  ASSERT_NE(f, nullptr);
  // 1.4 is over 1.25 and under 2: a warning; the waiting ranks idle 1 - 1/1.4 of the phase.
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NEAR(f->impact, 1 - 1 / 1.4, 1e-12);
  EXPECT_NE(f->evidence.find("layer 1"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("1.40x"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("expert 0"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("dropped 1.0%"), std::string::npos) << f->evidence;
  EXPECT_NE(f->advice.find("load-balancing loss"), std::string::npos);
  EXPECT_NE(f->advice.find("capacity factor"), std::string::npos);
  EXPECT_NE(f->advice.find("--ep"), std::string::npos);
  EXPECT_NE(f->advice.find("initialisation"), std::string::npos);
}

// The same counts with every expert on its own ep rank (ep 4) gate at the experts' ratio, 1.7;
// with ep unknown the experts' ratio stands in; with ep 1 nothing waits, and the router that
// sends expert 0 twice its share in step 2 (1.7 on average) is below the collapse mark.
TEST_F(ExpertLoadTest, WhatGatesTheStepFollowsTheRunsEp) {
  const std::vector<TraceEvent> records = {load(0, 2, 1, {100, 60, 20, 20}),
                                           load(0, 3, 1, {70, 50, 40, 40})};
  for (const auto& [config, gating] : std::vector<std::pair<std::string, std::optional<double>>>{
           {config_with_ep(4), 1.7}, {"{}", 1.7}, {config_with_ep(1), std::nullopt}}) {
    auto file = trace(config, records);
    auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
    ASSERT_TRUE(report.is_ok());
    ASSERT_EQ(report->layers.size(), 1u);
    EXPECT_EQ(report->layers[0].gating_ratio(report->ep), gating) << config;
    EXPECT_EQ(find_kind(expert_load_findings(*report), "expert_imbalance") != nullptr,
              gating.has_value())
        << config;
  }
}

TEST_F(ExpertLoadTest, DroppedTokensAloneRaiseTheFinding) {
  auto file = trace(config_with_ep(2),
                    {load(0, 2, 3, {50, 50, 50, 50}, 6), load(0, 3, 3, {50, 50, 50, 50}, 2)});
  auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok());
  EXPECT_DOUBLE_EQ(report->layers[0].dropped_share, 8.0 / 400);
  const std::vector<Finding> findings = expert_load_findings(*report);
  const Finding* f = find_kind(findings, "expert_imbalance");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->evidence.find("layer 3 dropped 2.0%"), std::string::npos) << f->evidence;
  EXPECT_NE(f->advice.find("route dropless"), std::string::npos);
}

TEST_F(ExpertLoadTest, ACollapsedRouterIsCriticalAndCountsTheLayersOver) {
  auto file =
      trace(config_with_ep(2), {load(0, 2, 0, {200, 0, 0, 0}), load(0, 2, 1, {90, 50, 30, 30})});
  auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok());
  ASSERT_EQ(report->layers.size(), 2u);
  EXPECT_DOUBLE_EQ(*report->layers[0].ep_ratio, 2.0);  // 200 / 100
  EXPECT_DOUBLE_EQ(*report->layers[1].ep_ratio, 1.4);  // 140 / 100
  const std::vector<Finding> findings = expert_load_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_NE(findings[0].evidence.find("layer 0"), std::string::npos);
  EXPECT_NE(findings[0].evidence.find("2 of the 2 MoE layers"), std::string::npos)
      << findings[0].evidence;
}

TEST_F(ExpertLoadTest, TextAndJsonCarryTheSameFigures) {
  auto file = trace(config_with_ep(2), {load(0, 2, 1, {100, 60, 20, 20}, 4, 0.02),
                                        load(0, 3, 1, {70, 50, 40, 40}, 0, 0.04)});
  auto report = analyze_expert_load(file.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok());
  const std::string text = format_expert_load(*report);
  EXPECT_NE(text.find("ep 2"), std::string::npos) << text;
  EXPECT_NE(text.find("1.70x (2.00x@2)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.40x (1.60x@2)"), std::string::npos) << text;
  EXPECT_NE(text.find("0 (42.5%)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.0%"), std::string::npos) << text;
  const nlohmann::json j = expert_load_json(*report);
  EXPECT_EQ(j["ep"], 2);
  const nlohmann::json& layer = j["layers"][0];
  EXPECT_DOUBLE_EQ(layer["expert_load_ratio"].get<double>(), 1.7);
  EXPECT_DOUBLE_EQ(layer["ep_load_ratio"].get<double>(), 1.4);
  EXPECT_DOUBLE_EQ(layer["gating_load_ratio"].get<double>(), 1.4);
  EXPECT_EQ(layer["ep_worst_step"], 2);
  EXPECT_DOUBLE_EQ(layer["hottest_expert_pct"].get<double>(), 42.5);
  EXPECT_DOUBLE_EQ(layer["dropped_pct"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(layer["aux_loss"].get<double>(), 0.03);
}

// The whole report: analyze_run files the expert section and its finding; a dense run's report
// has neither.
TEST_F(ExpertLoadTest, TheAnalysisReportCarriesItAndADenseRunHasNone) {
  auto moe =
      trace(config_with_ep(2), {load(0, 2, 1, {100, 60, 20, 20}), load(0, 3, 1, {70, 50, 40, 40})});
  auto report = analyze_run(moe.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->experts.applicable);
  EXPECT_NE(find_kind(report->findings, "expert_imbalance"), nullptr);
  EXPECT_NE(format_report(*report).find("Expert load (1 MoE layer, ep 2"), std::string::npos);
  EXPECT_EQ(report_json(*report)["experts"]["layers"][0]["layer"], 1);

  auto dense = trace("{}", {});
  report = analyze_run(dense.db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok());
  EXPECT_FALSE(report->experts.applicable);
  EXPECT_EQ(format_report(*report).find("Expert load"), std::string::npos);
  EXPECT_FALSE(report_json(*report)["experts"]["applicable"].get<bool>());
}

// A trace from before schema 5 has no expert_load table: it opens, and has no expert section.
TEST_F(ExpertLoadTest, ATraceOlderThanSchema5OpensWithNoExpertLoads) {
  const std::filesystem::path path = dir_ / "old.db";
  {
    auto written = trace(config_with_ep(2), {load(0, 2, 1, {1, 2})});
    std::filesystem::copy_file(written.path, path);
  }
  {
    auto db = profiler::SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP VIEW expert_loads; DROP VIEW expert_layers; DROP TABLE expert_load; "
                         "PRAGMA user_version = 4; UPDATE meta SET value = '4' WHERE key = "
                         "'schema_version'")
                    .is_ok());
  }
  auto old = profiler::open_trace(path);
  ASSERT_TRUE(old.is_ok()) << old.status().message();
  EXPECT_EQ(old->schema_version, 4);
  auto report = analyze_run(old->db, window_of(4, 2, 3, 200, 390));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->experts.applicable);
}

TEST(RunEp, ReadFromTheConfigOrUnknown) {
  EXPECT_EQ(run_ep(R"({"layout":{"ep":8}})"), 8);
  EXPECT_EQ(run_ep("{}"), std::nullopt);
  EXPECT_EQ(run_ep(R"({"layout":{"ep":0}})"), std::nullopt);
  EXPECT_EQ(run_ep(R"({"layout":{"ep":"8"}})"), std::nullopt);
  EXPECT_EQ(run_ep("not json"), std::nullopt);
}

}  // namespace
}  // namespace partrain::analyzers
