// --inject on real 4-rank runs, one test per fault kind: the launcher's exit code, its summary
// (and the flight-recorder diagnosis for hang, stop and desync), and what the trace says (run
// status, failing rank, exits, watchdog rows). Hang, stop and desync use a 2 s
// --collective-timeout so the watchdog fires quickly; a tensor-parallel hang checks that the
// diagnosis follows waits across communicators, a pipeline hang that transfers are diagnosed
// too, and a hang on the second of two nodes that node 0's diagnosis still names the rank. The
// fault matrix (fault_matrix*_test.cpp) runs every layout and kind.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/trace_query.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_partrain;
using testing::TraceQuery;

// A communicator as the diagnosis names it (profiler::communicator_name): world, dp 0, pp 0
// activations.
const std::string kGroup = R"((world|[a-z]+ \d+( [a-z]+)?))";

constexpr const char* kWorkload =
    "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --strategy ddp "
    "--micro-batch 1 --steps 3 --peak-flops 1e9 --grace 3s";

class FaultInjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = fs::path(::testing::TempDir()) /
             fmt::format("fault_{}_{}.db", ::getpid(),
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove(trace_);
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(trace_.string() + suffix);
  }
  CommandResult run(const std::string& flags) {
    return run_partrain(fmt::format("launch -n 4 {} {} --trace {}", kWorkload, flags,
                                    trace_.string()));
  }
  bool has(const std::string& text, const std::string& pattern) {
    return std::regex_search(text, std::regex(pattern));
  }

  // The launcher's diagnosis of a hang in rank 2 before an all-reduce, and its culprit.
  void expect_rank_2_blamed_for_never_issuing(const std::string& err) {
    EXPECT_TRUE(has(err, R"(partrain: diagnosis: )" + kGroup +
                             R"( seq \d+: missing ranks: rank 2 never issued all_reduce)"))
        << err;
    EXPECT_TRUE(
        has(err, R"(partrain: culprit: rank 2 \(missing_ranks at )" + kGroup + R"( seq \d+\))"))
        << err;
  }

  fs::path trace_;
};

TEST_F(FaultInjectTest, CrashAbortsTheRank) {
  CommandResult r = run("--inject crash:rank=1,step=1");
  EXPECT_EQ(r.exit_code, 134) << r.err;
  EXPECT_TRUE(has(r.err, R"(rank 1 \(node 0, host \S+, pid \d+\) failed first with signal 6 )"
                         R"(\(SIGABRT\))"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(--inject crash:rank=1,step=1: aborting at step 1)")) << r.err;
  EXPECT_TRUE(has(r.err, R"(exiting with 134 \(128 \+ signal 6\))")) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status, failing_rank FROM runs"), "failed|1\n");
  // Killed by a signal: no exit code (NULL), the signal kept.
  EXPECT_EQ(q.rows("SELECT exit_code IS NULL, exit_signal FROM ranks WHERE rank = 1"), "1|6\n");
  // Rank 1 finished step 0 and nothing after: the crash came at step 1's start.
  EXPECT_EQ(q.number("SELECT max(step) FROM steps WHERE rank = 1"), 0);
}

// The ranks the launcher stops after rank 1's crash ship what they recorded before they die:
// every rank finished step 0 (step 1's start is where rank 1 aborted, and its peers wait there
// in its gradient all-reduce), so every rank's step 0 and all-reduces are in the trace.
TEST_F(FaultInjectTest, StoppedRanksKeepWhatTheyRecorded) {
  CommandResult r = run("--inject crash:rank=1,step=1");
  ASSERT_EQ(r.exit_code, 134) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT rank, max(step) FROM steps GROUP BY rank ORDER BY rank"),
            "0|0\n1|0\n2|0\n3|0\n");
  const int64_t crashed = q.number("SELECT count(*) FROM collectives WHERE rank = 1");
  ASSERT_GT(crashed, 0);
  for (int rank : {0, 2, 3}) {
    EXPECT_GE(q.number(fmt::format("SELECT count(*) FROM collectives WHERE rank = {}", rank)),
              crashed)
        << "rank " << rank;
  }
  // analyze names the rank that failed first, with its cause, before anything that follows from
  // it: the failure itself, or (when the peers were stopped while waiting in rank 1's all-reduce
  // and dumped their flight recorders, which depends on timing) the launcher's diagnosis that
  // names the same rank and signal; both precede every other finding.
  CommandResult analysis = run_partrain("analyze --json " + trace_.string());
  ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
  const nlohmann::json findings = nlohmann::json::parse(analysis.out).at("findings");
  ASSERT_FALSE(findings.empty());
  const std::set<std::string> root_causes = {"rank_failed", "collective_diagnosis"};
  EXPECT_TRUE(root_causes.contains(findings[0].at("kind").get<std::string>())) << findings.dump(2);
  EXPECT_EQ(findings[0].at("rank"), 1) << findings.dump(2);
  bool failure_listed = false;
  for (const nlohmann::json& f : findings) {
    if (f.at("kind") != "rank_failed") continue;
    failure_listed = true;
    EXPECT_EQ(f.at("rank"), 1) << findings.dump(2);
  }
  EXPECT_TRUE(failure_listed) << findings.dump(2);
  // "aborted (signal 6, SIGABRT: ..." (rank_failed), "killed by signal 6 (SIGABRT)" (the
  // launcher's diagnosis).
  const std::string first_evidence = findings[0].at("evidence").get<std::string>();
  EXPECT_TRUE(first_evidence.find("aborted (signal 6, SIGABRT") != std::string::npos ||
              first_evidence.find("signal 6 (SIGABRT)") != std::string::npos)
      << findings.dump(2);
  // So does top, whose findings are analyze's.
  CommandResult top = run_partrain("top --json " + trace_.string());
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const nlohmann::json top_findings = nlohmann::json::parse(top.out).at("findings");
  ASSERT_FALSE(top_findings.empty());
  EXPECT_EQ(top_findings[0].at("kind"), findings[0].at("kind")) << top_findings.dump(2);
}

TEST_F(FaultInjectTest, ExitEndsTheRankWithItsCode) {
  CommandResult r = run("--inject exit:rank=2,step=1,code=7");
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_TRUE(has(r.err, R"(rank 2 \(node 0, host \S+, pid \d+\) failed first with exit code 7)"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(exiting with 7 \(rank 2's exit code\))")) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status, failing_rank FROM runs"), "failed|2\n");
  EXPECT_EQ(q.rows("SELECT exit_code, exit_signal FROM ranks WHERE rank = 2"), "7|0\n");
}

TEST_F(FaultInjectTest, OomFailsAnAllocationNamingCategoryAndSize) {
  CommandResult r = run("--inject oom:rank=3,step=1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, R"(rank 3: out of memory allocating [0-9.]+ (B|KiB|MiB) of )"
                         R"((params|grads|optimizer|activations) on host: the limit is .*)"
                         R"(\(--inject oom:rank=3,step=1 at step 1\))"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(rank 3 \(node 0, host \S+, pid \d+\) failed first with exit code 1)"))
      << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status, failing_rank FROM runs"), "failed|3\n");
  EXPECT_EQ(q.rows("SELECT exit_code FROM ranks WHERE rank = 3"), "1\n");
}

TEST_F(FaultInjectTest, HangFiresTheWatchdogAndNamesTheMissingRank) {
  CommandResult r = run("--inject hang:rank=2,step=1 --collective-timeout 2s");
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(has(r.err, R"(collective watchdog: all_reduce \(comm )" + kGroup +
                             R"(, seq \d+\) not completed )"
                             R"(after [0-9.]+ s \(--collective-timeout 2 s\))"))
      << r.err;
  // The dump on the firing rank's stderr: its unfinished all_reduce.
  EXPECT_TRUE(has(r.err, R"(flight recorder of rank [013] \(watchdog: )")) << r.err;
  EXPECT_TRUE(has(r.err, R"(seq \d+ all_reduce [0-9.]+ (B|KiB|MiB) float (started|enqueued))"))
      << r.err;
  expect_rank_2_blamed_for_never_issuing(r.err);
  EXPECT_TRUE(has(r.err, R"(failed first with exit code 124)")) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "failed\n");
  // The first rank out is one whose watchdog fired, never the hung one.
  const int64_t failing = q.number("SELECT failing_rank FROM runs");
  EXPECT_TRUE(failing == 0 || failing == 1 || failing == 3) << failing;
  EXPECT_EQ(q.rows(fmt::format("SELECT exit_code FROM ranks WHERE rank = {}", failing)), "124\n");
  EXPECT_GE(q.number("SELECT count(*) FROM stats WHERE name = 'collective_watchdog' AND "
                     "severity = 'error' AND rank <> 2"),
            1);
  EXPECT_EQ(q.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "2\n");
  // analyze puts the diagnosis first, and sends the reader to the hung rank, not to the first
  // rank out (whose watchdog fired while it waited).
  const CommandResult analyzed = run_partrain("analyze --json " + trace_.string());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const nlohmann::json findings = nlohmann::json::parse(analyzed.out)["findings"];
  ASSERT_GE(findings.size(), 2u) << analyzed.out;
  EXPECT_EQ(findings[0]["kind"], "collective_diagnosis");
  EXPECT_EQ(findings[0]["rank"], 2);
  EXPECT_EQ(findings[1]["kind"], "rank_failed");
  EXPECT_NE(findings[1]["advice"].get<std::string>().find("start from rank 2"), std::string::npos)
      << findings[1].dump();
  // The firing rank's unfinished all_reduce is in the trace with its state.
  EXPECT_GE(q.number(fmt::format("SELECT count(*) FROM collectives WHERE rank = {} AND op = "
                                 "'all_reduce' AND state IN ('started', 'enqueued')",
                                 failing)),
            1);
}

// The issue's reproduction (dp 2 x tp 2, rank 0 hanging): its tensor-parallel peer waits in the
// tp all_reduce, its data-parallel partner in the dp one, and rank 3 in the other dp pair on rank
// 1, which waits itself. Each communicator alone blamed a different rank (no culprit, the trace's
// collective_diagnosis NULL, analyze pointing at the first rank out); across communicators the
// relation has one root.
TEST_F(FaultInjectTest, TensorParallelHangIsBlamedOnTheHungRankNotOnThePeersWaitingForIt) {
  CommandResult r = run_partrain(fmt::format(
      "launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 256 "
      "--global-batch 8 --micro-batch 2 --device cpu --tp 2 --steps 5 --grace 3s "
      "--collective-timeout 2s --inject hang:rank=0,step=1 --trace {}",
      trace_.string()));
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: waits: rank 3 waits on rank 1 in all_reduce of [0-9.]+ )"
                         R"(KiB float on )" +
                             kGroup + R"( seq \d+ \(rank 1 never entered it\))"))
      << r.err;
  EXPECT_TRUE(
      has(r.err, R"(partrain: culprit: rank 0 \(missing_ranks at )" + kGroup +
                     R"( seq \d+\): hung )"
                     R"(outside any collective: .*it never entered all_reduce of .* where )"
                     R"(rank 1 waits; it never entered all_reduce of .* where rank 2 waits; )"
                     R"(rank 3 waits on it through others)"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: rank [123] failed first, but the collective diagnosis )"
                         R"(above blames rank 0)"))
      << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "0\n");
  const CommandResult analyzed = run_partrain("analyze --json " + trace_.string());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const nlohmann::json findings = nlohmann::json::parse(analyzed.out)["findings"];
  ASSERT_GE(findings.size(), 2u) << analyzed.out;
  EXPECT_EQ(findings[0]["kind"], "collective_diagnosis");
  EXPECT_EQ(findings[0]["rank"], 0);
  EXPECT_NE(findings[1]["advice"].get<std::string>().find("start from rank 0"), std::string::npos)
      << findings[1].dump();
}

// A rank stopped with SIGSTOP longer than the timeout (its watchdog stopped with it): the
// launcher sees its process stopped before it blames the transport or a healthy rank, names it,
// and resumes it so that it takes the stop signal at once rather than at the end of --grace.
TEST_F(FaultInjectTest, AStoppedRankIsNamedAsStoppedNotTheTransport) {
  CommandResult r = run("--inject stop:rank=1,step=1 --collective-timeout 2s");
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(has(r.err, R"(--inject stop:rank=1,step=1: stopping this process \(SIGSTOP\) at )"
                         R"(step 1)"))
      << r.err;
  EXPECT_TRUE(
      has(r.err, R"(partrain: culprit: rank 1 \(stopped at )" + kGroup +
                     R"( seq \d+\): its process )"
                     R"(was stopped \(state T: SIGSTOP or SIGTSTP\) when the run failed; it )"
                     R"(never entered all_reduce)"))
      << r.err;
  EXPECT_FALSE(has(r.err, "the transport failed or stalled")) << r.err;
  EXPECT_FALSE(has(r.err, R"(has not stopped: sending SIGKILL)")) << "resumed, it took SIGTERM";
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "1\n");
  EXPECT_NE(q.rows("SELECT description FROM stats WHERE name = 'collective_diagnosis'")
                .find("stopped (state T"),
            std::string::npos);
}

// On a pipeline the stuck operations are transfers: matched per channel, the hung stage is named.
TEST_F(FaultInjectTest, PipelineHangNamesTheStageThatNeverPostedItsRecv) {
  CommandResult r = run_partrain(fmt::format(
      "launch -n 2 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --pp 2 "
      "--micro-batch 1 --global-batch 4 --steps 3 --peak-flops 1e9 --grace 3s "
      "--inject hang:rank=1,step=1 --collective-timeout 2s --trace {}",
      trace_.string()));
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: diagnosis: send 0->1 on )" + kGroup +
                             R"( seq \d+: missing ranks: rank 1 )"
                             R"(never posted the matching recv)"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: culprit: rank 1 \(missing_ranks at send 0->1 on )")) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status, failing_rank FROM runs"), "failed|0\n");
}

TEST_F(FaultInjectTest, DesyncNamesTheMismatchingRankAndSeq) {
  CommandResult r = run("--inject desync:rank=1,step=1 --collective-timeout 2s");
  // Gloo may hang on the mismatched ops (the watchdog fires: 124) or throw (the failing rank's
  // code, 1): both are documented; either way the diagnosis names rank 1.
  EXPECT_TRUE(r.exit_code == 124 || r.exit_code == 1) << r.exit_code << "\n" << r.err;
  EXPECT_TRUE(has(r.err, R"(--inject desync:rank=1,step=1: issuing all_gather instead of the loss )"
                         R"(all_reduce at step 1)"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: diagnosis: world seq \d+: op mismatch: ranks 0,2,3 issued )"
                         R"(all_reduce of 4 B float; rank 1 issued all_gather of 16 B float)"))
      << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: culprit: rank 1 \(op_mismatch at world seq \d+\))")) << r.err;
  TraceQuery q(trace_);
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "failed\n");
  EXPECT_EQ(q.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "1\n");
  EXPECT_NE(q.rows("SELECT description FROM stats WHERE name = 'collective_diagnosis'")
                .find("op mismatch"),
            std::string::npos);
}

// A hang without --collective-timeout (nothing fires), stopped by Ctrl-C 7 s into it: the ranks'
// dumps show rank 0, 1 and 3 stuck in an all-reduce rank 2 never entered, and the launcher
// diagnoses it as a watchdog's dumps (it had said only "stopped by SIGINT").
TEST_F(FaultInjectTest, CtrlCOnAStuckRunNamesTheRankThatNeverCame) {
  // Stopped 7 s after rank 2 says it hangs (the start-up may take seconds on a busy machine).
  const std::string err = trace_.string() + ".err";
  CommandResult r = testing::run_shell(fmt::format(
      "{} launch -n 4 {} --inject hang:rank=2,step=1 --trace {} 2>{} & pid=$!; "
      "for i in $(seq 600); do grep -q 'hanging at step' {} && break; sleep 0.1; done; sleep 7; "
      "kill -INT $pid; wait $pid; status=$?; cat {} >&2; exit $status",
      PARTRAIN_BINARY, kWorkload, trace_.string(), err, err, err));
  fs::remove(err);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  expect_rank_2_blamed_for_never_issuing(r.err);
  EXPECT_EQ(TraceQuery(trace_).rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"),
            "2\n");
}

// Two launchers on one machine as two nodes of 2 ranks, rank 2 (node 1) hanging: node 1 hands
// its ranks' dumps to node 0 through the rendezvous store, so node 0's diagnosis covers all four
// ranks and names rank 2, though node 0 never saw it.
TEST_F(FaultInjectTest, MultiNodeHangIsDiagnosedByNodeZeroOverEveryNodesDumps) {
  const std::string node1_err = trace_.string() + ".node1.err";
  const std::string launch = fmt::format(
      "{} launch -n 2 {} --nnodes 2 --master-addr 127.0.0.1 --master-port {} --rdzv-timeout 60s "
      "--token t0k3n --inject hang:rank=2,step=1 --collective-timeout 2s --trace {}",
      PARTRAIN_BINARY, kWorkload, testing::free_tcp_port(), trace_.string());
  CommandResult r = testing::run_shell(launch + " --node-rank 1 2>" + node1_err + " & " +
                                       launch + " --node-rank 0; status=$?; wait; exit $status");
  const std::string node1 = testing::read_file(node1_err);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(has(r.err, R"(partrain: flight recorder: dumps of ranks 0-3; the collective watchdog )"
                         R"(fired on ranks? )"))
      << r.err;
  expect_rank_2_blamed_for_never_issuing(r.err);
  EXPECT_FALSE(has(r.err, "nothing is known of ranks")) << r.err;
  EXPECT_EQ(TraceQuery(trace_).rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"),
            "2\n");
  // Node 1 diagnoses what it has and points to node 0.
  EXPECT_TRUE(has(node1, R"(partrain: diagnosis: from this node's ranks only; node 0's launcher )"
                         R"(diagnoses the dumps of every node)"))
      << node1;
  // And names no culprit of its own: without node 0's dumps, a rank there that exited on its
  // watchdog reads "ended", and node 1's culprit line had contradicted node 0's.
  EXPECT_FALSE(has(node1, "partrain: culprit:")) << node1;
  fs::remove(node1_err);
  fs::path node1_trace = trace_;
  node1_trace.replace_filename(trace_.stem().string() + ".node1.db");
  fs::remove(node1_trace);
}

}  // namespace
}  // namespace partrain
