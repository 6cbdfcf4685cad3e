// `partrain analyze` end to end: the real binary on a real traced 4-rank GPT run (dp 2 x tp 2)
// prints every rank, --json has the documented keys with plausible values, --rank/--steps
// narrow it, the most recent trace in ./partrain-runs is found without a name, and bad input
// maps to exit 2 (usage, nothing to analyse) or 3 (unreadable trace).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/integration/command_runner.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_partrain;
using testing::run_shell;

class AnalyzeCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / fmt::format("analyze_{}", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    const auto launch = run_partrain(fmt::format(
        "-q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--dp 2 --tp 2 --micro-batch 2 --steps 6 --trace {}",
        trace().string()));
    ASSERT_EQ(launch.exit_code, 0) << launch.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path trace() { return *dir_ / "run.db"; }

  static json analyze_json(const std::string& flags) {
    const auto result = run_partrain(fmt::format("analyze {} --json {}", trace().string(), flags));
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return json::parse(result.out);  // throws (fails the test) on invalid JSON
  }

  static fs::path* dir_;
};
fs::path* AnalyzeCommandTest::dir_ = nullptr;

TEST_F(AnalyzeCommandTest, TextReportNamesTheWindowAndEveryRank) {
  const auto result = run_partrain("analyze " + trace().string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("(completed), world size 4, ranks 0-3"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("window: steps 1..5 (warm-up 1 skipped)"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("Time per rank (ms per step"), std::string::npos) << result.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(result.out.find(fmt::format("\n{:>4}  ", rank)), std::string::npos)
        << "rank " << rank << " missing:\n" << result.out;
  }
  EXPECT_NE(result.out.find("Findings"), std::string::npos) << result.out;
}

TEST_F(AnalyzeCommandTest, JsonHasTheDocumentedKeysWithPlausibleValues) {
  const json doc = analyze_json("");
  EXPECT_EQ(doc["world_size"], 4);
  EXPECT_EQ(doc["status"], "completed");
  EXPECT_EQ(doc["window"]["first_step"], 1);
  EXPECT_EQ(doc["window"]["last_step"], 5);
  ASSERT_EQ(doc["ranks"].size(), 4u);
  // The document shape: collectives and memory are lists, pipeline an object.
  ASSERT_TRUE(doc["collectives"].is_array()) << doc["collectives"].dump();
  EXPECT_GT(doc["collectives"].size(), 0u);
  for (const char* key : {"comm_id", "op", "count", "bytes", "busbw_gbps", "skew_p50_ms"}) {
    EXPECT_TRUE(doc["collectives"][0].contains(key)) << key;
  }
  ASSERT_TRUE(doc["memory"].is_array());
  EXPECT_EQ(doc["memory"].size(), 4u);
  EXPECT_TRUE(doc["pipeline"].is_object());
  EXPECT_TRUE(doc["collective_matching"]["desyncs"].is_array());
  for (const json& finding : doc["findings"]) {
    for (const char* key : {"kind", "severity", "rank", "evidence", "advice"}) {
      EXPECT_TRUE(finding.contains(key)) << key << " in " << finding.dump();
    }
  }
  for (const json& rank : doc["ranks"]) {
    for (const char* key : {"rank", "compute_ms", "comm_ms", "memcpy_ms", "idle_ms",
                            "overlap_pct", "step_ms_median"}) {
      EXPECT_TRUE(rank.contains(key)) << key << " in " << rank.dump();
    }
    EXPECT_GT(rank["compute_ms"].get<double>(), 0);
    EXPECT_GT(rank["comm_ms"].get<double>(), 0);  // dp and tp all-reduces
    EXPECT_EQ(rank["steps"], 5);
    const double overlap = rank["overlap_pct"].get<double>();
    EXPECT_GE(overlap, 0);
    EXPECT_LE(overlap, 100);
    const double sum = rank["compute_pct"].get<double>() + rank["exposed_comm_pct"].get<double>() +
                       rank["exposed_memcpy_pct"].get<double>() + rank["idle_pct"].get<double>();
    EXPECT_NEAR(sum, 100.0, 0.01) << rank.dump();
    // The window is the five steps, so its length per step is about a step's duration.
    EXPECT_NEAR(rank["window_ms"].get<double>() / 5, rank["step_ms_mean"].get<double>(),
                0.2 * rank["step_ms_mean"].get<double>());
  }
  ASSERT_TRUE(doc["findings"].is_array());
  for (const json& finding : doc["findings"]) {
    for (const char* key : {"kind", "severity", "rank", "evidence", "advice"}) {
      EXPECT_TRUE(finding.contains(key)) << key << " in " << finding.dump();
    }
  }
}

TEST_F(AnalyzeCommandTest, RankAndStepsNarrowTheReport) {
  const json doc = analyze_json("--rank 1,3 --steps 2:4");
  ASSERT_EQ(doc["ranks"].size(), 2u);
  EXPECT_EQ(doc["ranks"][0]["rank"], 1);
  EXPECT_EQ(doc["ranks"][1]["rank"], 3);
  EXPECT_EQ(doc["ranks"][0]["steps"], 3);
  EXPECT_EQ(doc["window"]["first_step"], 2);
  EXPECT_EQ(doc["window"]["last_step"], 4);
  const json all = analyze_json("--skip-steps 0");
  EXPECT_EQ(all["ranks"][0]["steps"], 6);
}

// PARTRAIN_STEPS is launch's step count and PARTRAIN_RANK a launched rank's own number: exported
// for a launch, they must not narrow the analysis (or the export) of its trace afterwards.
TEST_F(AnalyzeCommandTest, SelectionsAreNotTakenFromTheEnvironment) {
  const std::string env = "PARTRAIN_STEPS=20 PARTRAIN_RANK=1 PARTRAIN_RANKS=1";
  const auto analyzed = run_partrain("analyze " + trace().string() + " --json --skip-steps 0", env);
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const json doc = json::parse(analyzed.out);
  EXPECT_EQ(doc["ranks"].size(), 4u);
  EXPECT_EQ(doc["ranks"][0]["steps"], 6);
  const auto exported = run_partrain("export " + trace().string() + " -o -", env);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("\"name\":\"rank 3 "), std::string::npos) << "rank 3 exported too";
  EXPECT_NE(exported.err.find("for 4 ranks"), std::string::npos) << exported.err;
  // Other flags still read theirs.
  const auto skipped =
      run_partrain("analyze " + trace().string() + " --json", "PARTRAIN_SKIP_STEPS=3");
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_EQ(json::parse(skipped.out)["window"]["first_step"], 3);
}

TEST_F(AnalyzeCommandTest, WithoutATraceTheNewestInPartrainRunsIsAnalysed) {
  const fs::path cwd = *dir_ / "cwd";
  fs::create_directories(cwd / "partrain-runs");
  fs::copy_file(trace(), cwd / "partrain-runs" / "old.db", fs::copy_options::overwrite_existing);
  fs::copy_file(trace(), cwd / "partrain-runs" / "new.db", fs::copy_options::overwrite_existing);
  const fs::file_time_type now = fs::last_write_time(cwd / "partrain-runs" / "new.db");
  fs::last_write_time(cwd / "partrain-runs" / "old.db", now - std::chrono::hours(1));
  const auto result =
      run_shell(fmt::format("cd {} && {} analyze", cwd.string(), PARTRAIN_BINARY));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("partrain-runs/new.db"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("world size 4"), std::string::npos) << result.out;
}

TEST_F(AnalyzeCommandTest, NothingToAnalyseIsExit2) {
  const fs::path empty = *dir_ / "empty";
  fs::create_directories(empty);
  const auto result =
      run_shell(fmt::format("cd {} && {} analyze", empty.string(), PARTRAIN_BINARY));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("partrain launch"), std::string::npos) << result.err;
}

TEST_F(AnalyzeCommandTest, BadSelectionsAreExit2) {
  // --rank '' selected every rank; now it is a selection of none, refused.
  for (const char* flags :
       {"--steps 9:12", "--rank 7", "--steps x", "--skip-steps 6", "--rank ''"}) {
    const auto result = run_partrain(fmt::format("analyze {} {}", trace().string(), flags));
    EXPECT_EQ(result.exit_code, 2) << flags << ": " << result.err;
    EXPECT_FALSE(result.err.empty()) << flags;
  }
}

// A foreign program's command line is recorded as it was typed, bytes that are not UTF-8
// included; --json (analyze's and top's) writes them as U+FFFD instead of aborting.
TEST_F(AnalyzeCommandTest, BytesThatAreNotUtf8BecomeReplacementCharactersInJson) {
  const fs::path traced = *dir_ / "latin1.db";
  const auto trace = run_partrain(fmt::format(
      "-q trace -o {} -- env RANK=0 WORLD_SIZE=1 python3 -c 'import time; time.sleep(0.1)' "
      "\"$(printf 'caf\\351')\"",
      traced.string()));
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  for (const char* command : {"analyze", "top"}) {
    const auto result = run_partrain(fmt::format("{} {} --json", command, traced.string()));
    ASSERT_EQ(result.exit_code, 0) << command << ": " << result.err;
    const json document = json::parse(result.out);
    EXPECT_FALSE(document.empty()) << command;
  }
  const json report = json::parse(run_partrain("analyze " + traced.string() + " --json").out);
  EXPECT_NE(report.dump().find("caf\ufffd"), std::string::npos) << report.dump();
}

// A foreign program partrain saw nothing of (no torch.distributed, no NCCL, no step marker): the
// report says so and why, and makes no finding from the processes' lifetimes (it was a critical
// "idle" finding with optimizer advice). top shows the same report.
TEST_F(AnalyzeCommandTest, AProgramWithNothingRecordedIsSaidSoAndNothingElse) {
  const fs::path foreign = *dir_ / "foreign.db";
  const auto traced =
      run_partrain(fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 sh -c 'sleep 0.3'",
                               foreign.string()));
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  const auto result = run_partrain(fmt::format("analyze {} --json", foreign.string()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json report = json::parse(result.out);
  ASSERT_EQ(report.at("findings").size(), 1u) << report.at("findings").dump(2);
  const json& finding = report.at("findings").at(0);
  EXPECT_EQ(finding.at("kind"), "nothing_recorded");
  EXPECT_NE(finding.at("advice").get<std::string>().find("torch.distributed"), std::string::npos);

  const auto text = run_partrain("analyze " + foreign.string());
  EXPECT_NE(text.out.find("no collectives, no steps and no compute"), std::string::npos)
      << text.out;
  const auto top = run_partrain(fmt::format("top --once --json {}", foreign.string()));
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const json dashboard = json::parse(top.out);
  EXPECT_EQ(dashboard.at("findings"), report.at("findings")) << top.out;
}

// A program none of whose processes became a rank (one process, no launcher's RANK, no
// torch.distributed): the report says so, with the run's status and what makes a rank, in text
// and --json, exit 0, and top shows the same finding. It was "the trace has no ranks: nothing to
// analyse", exit 2 (a usage error), --json printed nothing, and top had no finding.
TEST_F(AnalyzeCommandTest, ATraceInWhichNoProcessBecameARankIsSaidSo) {
  const fs::path rankless = *dir_ / "rankless.db";
  const auto traced =
      run_partrain(fmt::format("trace -o {} -- sh -c 'sleep 0.1'", rankless.string()));
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  // The trace's end says so already (it said only "trace: FILE (1 events)").
  EXPECT_NE(traced.err.find("no process of the command became a rank"), std::string::npos)
      << traced.err;
  const auto result = run_partrain(fmt::format("analyze {} --json", rankless.string()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json report = json::parse(result.out);
  ASSERT_EQ(report.at("findings").size(), 1u) << report.at("findings").dump(2);
  const json& finding = report.at("findings").at(0);
  EXPECT_EQ(finding.at("kind"), "nothing_recorded");
  EXPECT_NE(finding.at("evidence")
                .get<std::string>()
                .find("no process of the run became a rank (status completed)"),
            std::string::npos)
      << finding.dump(2);
  EXPECT_NE(finding.at("advice").get<std::string>().find("init_process_group"), std::string::npos);
  const auto text = run_partrain("analyze " + rankless.string());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(completed), world size 0, ranks none\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("nothing_recorded: no process of the run became a rank"),
            std::string::npos)
      << text.out;
  // Asked for a rank, it has none: a usage error still.
  EXPECT_EQ(run_partrain("analyze " + rankless.string() + " --rank 0").exit_code, 2);
  const auto top = run_partrain(fmt::format("top --once --json {}", rankless.string()));
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_EQ(json::parse(top.out).at("findings"), report.at("findings")) << top.out;
}

TEST_F(AnalyzeCommandTest, UnreadableTraceIsExit3) {
  const fs::path junk = *dir_ / "junk.db";
  std::ofstream(junk) << "not a database";
  const auto result = run_partrain("analyze " + junk.string());
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("junk.db"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace partrain
