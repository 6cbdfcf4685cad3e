// `partrain export` end to end: the real binary on a small two-rank trace writes JSON that
// parses, says what it wrote, honours -o, --rank and --steps, leaves no file behind when it
// fails, and maps bad flags to exit 2 and bad traces to exit 3.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "profiler/trace_writer.h"
#include "tests/integration/command_runner.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_partrain;

profiler::CollectiveRecord p2p(int rank, std::string_view op, int peer, int64_t start) {
  profiler::CollectiveRecord r;
  r.world_rank = rank;
  r.step = 1;
  r.event.comm_id = "pp0-1";
  r.event.op = op;
  r.event.dtype = "bfloat16";
  r.event.count = 512;
  r.event.bytes = 1024;
  r.event.peer = peer;
  r.event.rank = rank;
  r.event.group_ranks = {0, 1};
  r.event.start_ns = start;
  r.event.end_ns = start + 2'000;
  r.event.state = profiler::CollectiveState::kCompleted;
  return r;
}

// Two ranks, steps 0 and 1 (10 us each), a phase per step and rank, one send/recv in step 1 and
// a memory sample per rank.
void write_trace(const fs::path& path) {
  using namespace profiler;
  auto writer = TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  std::vector<TraceEvent> events = {RunInfo{"run-e2e", "partrain launch -n 2", "{}", 2, 0, 0}};
  for (int r = 0; r < 2; ++r) {
    events.push_back(RankInfo{r, r, 0, "node7", 4000 + r, "cpu"});
    events.push_back(MemorySample{r, 0, 100, 4096});
    for (int64_t s = 0; s < 2; ++s) {
      events.push_back(StepEvent{r, s, s * 10'000, 10'000, 1.0, 128});
      events.push_back(SliceEvent{r, TrackKind::kCpuThread, "main", "forward",
                                  SliceCategory::kPhase, s * 10'000 + 100, 5'000, s, 0, -1});
    }
  }
  events.push_back(p2p(0, "send", 1, 16'000));
  events.push_back(p2p(1, "recv", 0, 15'500));
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->set_run_status(RunStatus::kCompleted).is_ok());
}

class ExportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("export_command_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    trace_ = dir_ / "run.db";
    write_trace(trace_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every file in the directory other than the trace (and its WAL companions).
  std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("run.db", 0) != 0) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
  fs::path trace_;
};

size_t count_phase(const json& doc, std::string_view phase) {
  return static_cast<size_t>(std::count_if(doc.at("traceEvents").begin(),
                                           doc.at("traceEvents").end(),
                                           [&](const json& e) { return e.at("ph") == phase; }));
}

TEST_F(ExportCommandTest, WritesJsonBesideTheTraceAndSaysWhatItWrote) {
  auto result = run_partrain("export " + trace_.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(outputs(), std::vector<std::string>{"run.json"});
  json doc = json::parse(testing::read_file((dir_ / "run.json").string()));
  EXPECT_EQ(count_phase(doc, "X"), 6u);
  EXPECT_EQ(count_phase(doc, "C"), 2u);
  EXPECT_EQ(count_phase(doc, "s"), 1u);
  EXPECT_EQ(count_phase(doc, "f"), 1u);
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 2);

  std::smatch m;
  const std::regex summary(
      R"(wrote (\d+) events \((\d+) slices, (\d+) counters, (\d+) flows\) for 2 ranks to (\S+))");
  ASSERT_TRUE(std::regex_search(result.err, m, summary)) << result.err;
  EXPECT_EQ(std::stoul(m[1]), doc.at("traceEvents").size());
  EXPECT_EQ(m[2], "6");
  EXPECT_EQ(m[3], "2");
  EXPECT_EQ(m[4], "1");
  EXPECT_EQ(m[5], (dir_ / "run.json").string());
  EXPECT_TRUE(result.out.empty());
}

TEST_F(ExportCommandTest, DashWritesToStdoutAndFiltersNarrowIt) {
  auto all = run_partrain("export --format chrome " + trace_.string() + " -o -");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(count_phase(json::parse(all.out), "X"), 6u);
  EXPECT_TRUE(outputs().empty());

  auto rank1 = run_partrain("export " + trace_.string() + " -o - --rank 1");
  ASSERT_EQ(rank1.exit_code, 0) << rank1.err;
  json one = json::parse(rank1.out);
  EXPECT_EQ(count_phase(one, "X"), 3u);  // two phases and the recv
  EXPECT_EQ(count_phase(one, "s"), 0u);  // its sender is not exported
  EXPECT_EQ(one.at("distributedInfo").at("rank"), 1);

  auto step1 = run_partrain("export " + trace_.string() + " -o - --steps 1:");
  ASSERT_EQ(step1.exit_code, 0) << step1.err;
  json late = json::parse(step1.out);
  EXPECT_EQ(count_phase(late, "X"), 4u);  // step 1's phases, the send and the recv
  EXPECT_EQ(count_phase(late, "C"), 2u);  // the bytes in use as step 1 starts
  EXPECT_EQ(
      count_phase(json::parse(run_partrain("export " + trace_.string() + " -o - --steps 0").out),
                  "X"),
      2u);
  EXPECT_EQ(
      count_phase(json::parse(run_partrain("export " + trace_.string() + " -o - --steps :0").out),
                  "X"),
      2u);
}

TEST_F(ExportCommandTest, ExplicitOutputIsWrittenWhole) {
  const fs::path out = dir_ / "trace.json";
  auto result = run_partrain("export " + trace_.string() + " -o " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(outputs(), std::vector<std::string>{"trace.json"});  // no temporary left beside it
  EXPECT_NO_THROW(json::parse(testing::read_file(out.string())));
}

// --per-rank: rank<N>.json per rank in a new directory, each that rank alone with its rank where
// HTA's pattern finds it; the directory's other files are left alone.
TEST_F(ExportCommandTest, PerRankWritesOneFilePerRank) {
  const fs::path out = dir_ / "hta";
  auto result = run_partrain("export " + trace_.string() + " --per-rank -o " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out)) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"rank0.json", "rank1.json"}));
  for (int rank : {0, 1}) {
    const std::string text = testing::read_file((out / fmt::format("rank{}.json", rank)).string());
    std::smatch found;
    ASSERT_TRUE(std::regex_search(text, found, std::regex(R"("rank":\s+(\d+))")));
    EXPECT_EQ(found[1], std::to_string(rank));
    std::set<int> pids;
    const json doc = json::parse(text);
    for (const json& e : doc.at("traceEvents")) pids.insert(e.at("pid").get<int>());
    EXPECT_EQ(pids, std::set<int>{rank + 1});
  }
  auto one = run_partrain("export " + trace_.string() + " --per-rank --rank 1 -o " +
                          (dir_ / "one").string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(fs::exists(dir_ / "one" / "rank1.json"));
  EXPECT_FALSE(fs::exists(dir_ / "one" / "rank0.json"));
}

// Refusals before anything is written (exit 2): no directory named, -o a file, a rank not in the
// trace, a rank's file already there without --force (which then replaces it).
TEST_F(ExportCommandTest, PerRankRefusesWithoutWriting) {
  auto no_dir = run_partrain("export " + trace_.string() + " --per-rank");
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.err;
  EXPECT_NE(no_dir.err.find("-o"), std::string::npos) << no_dir.err;

  const fs::path file = dir_ / "file.json";
  std::ofstream(file) << "not a directory";
  auto on_file = run_partrain("export " + trace_.string() + " --per-rank -o " + file.string());
  EXPECT_EQ(on_file.exit_code, 2) << on_file.err;
  EXPECT_NE(on_file.err.find("not a directory"), std::string::npos) << on_file.err;

  const fs::path out = dir_ / "hta";
  auto absent = run_partrain("export " + trace_.string() + " --per-rank --rank 5 -o " +
                             out.string());
  EXPECT_EQ(absent.exit_code, 2) << absent.err;
  EXPECT_NE(absent.err.find("ranks present: 0,1"), std::string::npos) << absent.err;
  EXPECT_FALSE(fs::exists(out));

  fs::create_directories(out);
  std::ofstream(out / "rank1.json") << "kept";
  auto refused = run_partrain("export " + trace_.string() + " --per-rank -o " + out.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(out / "rank0.json"));
  EXPECT_EQ(testing::read_file((out / "rank1.json").string()), "kept");
  auto forced =
      run_partrain("export " + trace_.string() + " --per-rank --force -o " + out.string());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NO_THROW(json::parse(testing::read_file((out / "rank1.json").string())));
}

// An existing file is not replaced without --force: it may be another run's trace.
TEST_F(ExportCommandTest, ExistingOutputIsKeptWithoutForce) {
  const fs::path other = dir_ / "other.db";
  std::ofstream(other) << "another run's trace";
  auto refused = run_partrain("export " + trace_.string() + " -o " + other.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::read_file(other.string()), "another run's trace");
  auto forced = run_partrain("export --force " + trace_.string() + " -o " + other.string());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NO_THROW(json::parse(testing::read_file(other.string())));
}

// An output that cannot take the JSON (a full disk; /dev/full here) is named with its reason: the
// message had named the trace and "the JSON output" only.
TEST_F(ExportCommandTest, AFullOutputIsNamedWithItsReason) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  auto full = run_partrain("export " + trace_.string() + " -o /dev/full");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("writing /dev/full failed: No space left on device"), std::string::npos)
      << full.err;
  // To stdout: said once (the final check of stdout said it a second time).
  auto to_stdout = run_partrain("export " + trace_.string() + " -o - > /dev/full");
  EXPECT_EQ(to_stdout.exit_code, 1) << to_stdout.err;
  EXPECT_EQ(to_stdout.err, "partrain: error: " + trace_.string() +
                               ": writing stdout failed: No space left on device\n");
}

// --force replaces a symbolic link's target and keeps the link; a FIFO (as a device such as
// /dev/null) is written into, with or without --force, and stays a FIFO. Both used to be replaced
// by a plain file (`-o /dev/full --force` turned the device into a file).
TEST_F(ExportCommandTest, ALinkOrAFifoIsWrittenThroughNotReplaced) {
  const fs::path target = dir_ / "target.json", link = dir_ / "link.json";
  std::ofstream(target) << "old";
  fs::create_symlink(target, link);
  auto forced = run_partrain("export --force " + trace_.string() + " -o " + link.string());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_NO_THROW(json::parse(testing::read_file(target.string())));

  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const fs::path got = dir_ / "got.json";
  auto streamed = testing::run_shell("cat " + fifo.string() + " > " + got.string() + " & " +
                                     testing::partrain_binary() + " export " + trace_.string() +
                                     " -o " + fifo.string() + "; status=$?; wait; exit $status");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(json::parse(testing::read_file(got.string()))["distributedInfo"]["world_size"], 2);

  const fs::path directory = dir_ / "out.json";
  fs::create_directories(directory);
  auto refused = run_partrain("export --force " + trace_.string() + " -o " + directory.string());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("is a directory: name a file with -o"), std::string::npos)
      << refused.err;
}

TEST_F(ExportCommandTest, UnknownRankIsExit2NamingTheRanksAndLeavesNoFile) {
  auto result = run_partrain("export " + trace_.string() + " --rank 0,5");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("rank 5 is not in this trace (ranks present: 0,1)"), std::string::npos)
      << result.err;
  EXPECT_TRUE(outputs().empty());
}

TEST_F(ExportCommandTest, MalformedFlagsAreExit2SayingWhatIsAccepted) {
  for (const char* steps : {"x", "3:1", "1:2:3", ":", "-1"}) {
    auto result = run_partrain("export " + trace_.string() + " --steps=" + steps);
    EXPECT_EQ(result.exit_code, 2) << steps;
    EXPECT_NE(result.err.find("write A:B (steps A to B, inclusive), A: (step A on), :B"),
              std::string::npos)
        << result.err;
  }
  auto steps_missing = run_partrain("export " + trace_.string() + " --steps 7:9");
  EXPECT_EQ(steps_missing.exit_code, 2);
  EXPECT_NE(steps_missing.err.find("steps recorded: 0..1"), std::string::npos) << steps_missing.err;
  auto rank = run_partrain("export " + trace_.string() + " --rank 0,,1");
  EXPECT_EQ(rank.exit_code, 2);
  EXPECT_NE(rank.err.find("--rank '0,,1'"), std::string::npos) << rank.err;
  auto format = run_partrain("export --format perfetto " + trace_.string());
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_NE(format.err.find("accepted formats: chrome"), std::string::npos) << format.err;
  EXPECT_TRUE(outputs().empty());
}

TEST_F(ExportCommandTest, UnreadableTraceIsExit3) {
  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "not a database\n";
  auto result = run_partrain("export " + text.string());
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE(result.err.find("is not an SQLite database"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "notes.json"));
  auto missing = run_partrain("export " + (dir_ / "absent.db").string());
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
}

TEST_F(ExportCommandTest, OutputThatIsTheTraceItselfIsRefused) {
  const fs::path odd = dir_ / "odd.json";
  fs::copy_file(trace_, odd);
  auto result = run_partrain("export " + odd.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("is the trace itself"), std::string::npos) << result.err;
}

// A trace named as one of --per-rank's outputs (here pr/rank0.json) was replaced by its own
// export with --force (exit 0, the SQLite trace gone); the single-file export refuses this.
TEST_F(ExportCommandTest, PerRankOutputThatIsTheTraceItselfIsRefusedEvenWithForce) {
  const fs::path out = dir_ / "pr";
  fs::create_directories(out);
  const fs::path odd = out / "rank0.json";
  fs::copy_file(trace_, odd);
  const std::string before = testing::read_file(odd.string());
  auto result = run_partrain("export " + odd.string() + " --per-rank --force -o " + out.string());
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("the output " + odd.string() + " is the trace itself"),
            std::string::npos)
      << result.err;
  EXPECT_TRUE(testing::read_file(odd.string()) == before) << "the trace was overwritten";
  EXPECT_FALSE(fs::exists(out / "rank1.json")) << "refused before the first file is written";
}

TEST_F(ExportCommandTest, HelpExplainsTheFormatFiltersAndPerfetto) {
  auto result = run_partrain("export --help");
  EXPECT_EQ(result.exit_code, 0);
  for (const char* needle : {"--rank", "--steps", "-o,--output", "ui.perfetto.dev",
                             "chrome://tracing", "distributedInfo", "Examples:", "Exit codes:"}) {
    EXPECT_NE(result.out.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace partrain
