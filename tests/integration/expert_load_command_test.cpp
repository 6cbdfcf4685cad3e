// The expert load of a mixture-of-experts run through the real binary: `partrain analyze` (text
// and --json) and `partrain top --json` on traces written by the real TraceWriter, one with a
// balanced router (no finding) and one whose most loaded ep rank takes 1.5x the mean (the
// expert_imbalance finding, with the same figures in every output); and a real launched run of
// the built-in gpt with experts over ep 2, whose dispatch and combine all_to_all reach analyze's
// collective table with nccl-tests' size and busbw, and whose config gives analyze its ep.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::run_partrain;

// Steps 0..3 of 4 ranks (step 0 the warm-up analyze skips) and layer 2's routing over 4 experts
// on ep 2 in every step, recorded by every rank as a workload would.
fs::path write_moe_trace(const fs::path& path, const std::vector<int64_t>& tokens) {
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 4; ++rank) {
    events.push_back(profiler::RankInfo{rank, rank, 0, "host", 100 + rank, "cpu"});
    for (int64_t step = 0; step < 4; ++step) {
      const int64_t start = step * 100'000'000;
      events.push_back(profiler::StepEvent{rank, step, start, 90'000'000, 3.0, 256});
      events.push_back(profiler::ExpertLoadRecord{rank, step, 2, tokens, 0, 0.015});
    }
  }
  testing::write_completed_trace(path, R"({"workload":"gpt","layout":{"world":4,"ep":2}})", 4,
                                 std::move(events));
  return path;
}

nlohmann::json run_json(const std::string& args) {
  const auto result = run_partrain(args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

const nlohmann::json* finding(const nlohmann::json& findings, const std::string& kind) {
  for (const nlohmann::json& f : findings) {
    if (f["kind"] == kind) return &f;
  }
  return nullptr;
}

// Ep rank 0 holds experts 0-1 (100 + 50), ep rank 1 experts 2-3 (25 + 25): 150 / 100 = 1.5x;
// over experts 100 / 50 = 2x; expert 0 has half the assignments.
TEST(ExpertLoadCommand, AnImbalancedRouterIsFoundByAnalyzeAndTop) {
  testing::ScratchDir dir;
  const fs::path trace = write_moe_trace(dir.path() / "moe.db", {100, 50, 25, 25});

  const nlohmann::json report = run_json("analyze --json " + trace.string());
  const nlohmann::json& layer = report["experts"]["layers"][0];
  EXPECT_EQ(report["experts"]["ep"], 2);
  EXPECT_EQ(layer["layer"], 2);
  EXPECT_EQ(layer["steps"], 3);
  EXPECT_DOUBLE_EQ(layer["ep_load_ratio"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(layer["expert_load_ratio"].get<double>(), 2.0);
  EXPECT_EQ(layer["hottest_expert"], 0);
  EXPECT_DOUBLE_EQ(layer["hottest_expert_pct"].get<double>(), 50.0);
  const nlohmann::json* f = finding(report["findings"], "expert_imbalance");
  ASSERT_NE(f, nullptr) << report["findings"].dump(2);
  EXPECT_EQ((*f)["severity"], "warning");
  EXPECT_NEAR((*f)["impact_pct"].get<double>(), 100 * (1 - 1 / 1.5), 1e-9);

  // The text says the same.
  const auto text = run_partrain("analyze " + trace.string());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Expert load (1 MoE layer, ep 2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2.00x (2.00x@1)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1.50x (1.50x@1)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("[warning] expert_imbalance: layer 2: the most loaded of 2 ep ranks"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("expert 0 is the hottest with 50.0% of the assignments"),
            std::string::npos)
      << text.out;

  // The dashboard reads the same report.
  const nlohmann::json top = run_json("top --json " + trace.string());
  EXPECT_EQ(top["analysis"]["report"]["experts"], report["experts"]);
  EXPECT_NE(finding(top["findings"], "expert_imbalance"), nullptr) << top["findings"].dump(2);
}

TEST(ExpertLoadCommand, ABalancedRouterRaisesNothing) {
  testing::ScratchDir dir;
  const fs::path trace = write_moe_trace(dir.path() / "moe.db", {50, 50, 50, 50});
  const nlohmann::json report = run_json("analyze --json " + trace.string());
  EXPECT_DOUBLE_EQ(report["experts"]["layers"][0]["ep_load_ratio"].get<double>(), 1.0);
  EXPECT_EQ(finding(report["findings"], "expert_imbalance"), nullptr) << report["findings"].dump(2);
  const nlohmann::json top = run_json("top --json " + trace.string());
  EXPECT_EQ(finding(top["findings"], "expert_imbalance"), nullptr) << top["findings"].dump(2);
}

TEST(ExpertLoadCommand, ARealExpertParallelRunsAllToAllHasNcclTestsBusbw) {
  testing::ScratchDir dir;
  const fs::path trace = dir.path() / "moe.db";
  const auto launch = run_partrain(fmt::format(
      "-q launch -n 2 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
      "--experts 4 --top-k 2 --moe-ffn 64 --dp 2 --ep 2 --micro-batch 1 --steps 4 --trace {}",
      trace.string()));
  ASSERT_EQ(launch.exit_code, 0) << launch.err;
  const nlohmann::json report = run_json("analyze --json " + trace.string());
  EXPECT_EQ(report["experts"]["ep"], 2) << report["experts"].dump();
  int rows = 0;
  for (const nlohmann::json& row : report["collectives"]) {
    if (row["op"] != "all_to_all") continue;
    ++rows;
    EXPECT_EQ(row["group_size"], 2);
    const double algbw = row["algbw_gbps"].get<double>();
    ASSERT_GT(algbw, 0) << row.dump();
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), algbw * (2 - 1) / 2.0, 1e-12 * algbw)
        << row.dump();
  }
  EXPECT_GT(rows, 0) << report["collectives"].dump(2);
  // The workload records its routing and names its exchanges: both MoE layers' token choices
  // (32 tokens a rank x 2 ranks x top-2 a step), and dispatch and combine as rows of their own.
  ASSERT_EQ(report["experts"]["layers"].size(), 2u) << report["experts"].dump();
  for (const nlohmann::json& layer : report["experts"]["layers"]) {
    EXPECT_EQ(layer["assignments_per_step"], 32 * 2 * 2) << layer.dump();
  }
  std::set<std::string> labels;
  for (const nlohmann::json& row : report["collectives"]) {
    if (row["op"] == "all_to_all" && row["label"].is_string()) labels.insert(row["label"]);
  }
  EXPECT_EQ(labels, (std::set<std::string>{"moe_combine", "moe_combine_grad", "moe_dispatch",
                                           "moe_dispatch_grad"}));
  // Each all_to_all's S is nccl-tests' alltoall size: the whole per-rank buffer, n x the
  // per-peer count (NCCL's count argument) x 4-byte floats.
  testing::TraceQuery query(trace);
  EXPECT_GT(query.number("SELECT count(*) FROM collectives WHERE op = 'all_to_all'"), 0);
  EXPECT_EQ(query.number("SELECT count(*) FROM collectives WHERE op = 'all_to_all' AND "
                         "bytes <> group_size * count * 4"),
            0);
}

}  // namespace
}  // namespace partrain
