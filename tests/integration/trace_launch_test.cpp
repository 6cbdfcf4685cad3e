// `partrain launch` traces by default: a real 4-rank run's SQLite file holds what every rank did
// (slices for every step, collectives matched across ranks, memory reaching the reported peaks,
// clock offsets, steps with losses), its status follows the run's end, and a launcher killed
// with SIGKILL leaves a file that opens, passes integrity_check and reads as incomplete. A trace
// that fills its disk (or its --trace-max-size) stops while the run goes on.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

const char* kModel =
    "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3";

class TraceLaunchTest : public ::testing::Test {
 protected:
  ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TraceLaunchTest, FsdpRunRecordsEveryRankStepCollectiveAndMemoryPeak) {
  constexpr int kSteps = 3;
  const fs::path db = dir_ / "fsdp.db";
  CommandResult r = run_partrain(fmt::format(
      "-q launch -n 4 --strategy fsdp --micro-batch 1 {} --steps {} --json --trace {}", kModel,
      kSteps, db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json summary = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  ASSERT_TRUE(fs::exists(db));
  TraceQuery q(db);

  EXPECT_EQ(q.rows("SELECT status, world_size, failing_rank FROM runs"), "completed|4|NULL\n");
  EXPECT_NE(q.rows("SELECT command FROM runs").find("launch -n 4"), std::string::npos);
  EXPECT_EQ(q.rows("SELECT json_extract(config, '$.backend'), json_extract(config, '$.layout.zero') "
                   "FROM runs"),
            "gloo|3\n");

  // Every rank has a step slice, forward and backward phases and per-layer compute slices in
  // every step.
  for (const char* name : {"step", "forward", "backward", "optimizer", "block.forward",
                           "block.backward"}) {
    EXPECT_EQ(q.number(fmt::format("SELECT count(*) FROM (SELECT DISTINCT rank, step FROM slices "
                                   "WHERE name = '{}' AND step IS NOT NULL)",
                                   name)),
              4 * kSteps)
        << name;
  }
  EXPECT_EQ(q.rows("SELECT DISTINCT layer FROM slices WHERE name = 'block.forward' ORDER BY 1"),
            "0\n1\n");

  // Matched collectives: every (comm_id, seq) on every member rank, same op and bytes.
  const std::string unmatched = q.rows(
      "SELECT comm_id, seq, count(*), group_size, count(DISTINCT op), count(DISTINCT bytes) "
      "FROM collectives WHERE op NOT IN ('send', 'recv') GROUP BY comm_id, seq "
      "HAVING count(*) <> group_size OR count(DISTINCT op) <> 1 OR count(DISTINCT bytes) <> 1 "
      "OR count(DISTINCT group_ranks) <> 1");
  EXPECT_EQ(unmatched, "");
  // FSDP: parameters all-gathered and gradients reduce-scattered over the 4 ranks, every step.
  EXPECT_EQ(q.rows("SELECT DISTINCT op FROM collectives WHERE step = 1 AND group_size = 4 AND "
                   "op IN ('all_gather', 'reduce_scatter') ORDER BY 1"),
            "all_gather\nreduce_scatter\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE state <> 'completed'"), 0);

  // Memory: the highest bytes in use per category equal the peaks the run reports.
  for (int rank = 0; rank < 4; ++rank) {
    for (const char* category :
         {"params", "grads", "optimizer", "activations", "comm", "workspace"}) {
      const int64_t want = summary["memory_peak_bytes"][std::to_string(rank)][category].get<int64_t>();
      const int64_t got = q.number(fmt::format(
          "SELECT coalesce(max(bytes), 0) FROM memory_events WHERE rank = {} AND category = '{}'",
          rank, category));
      EXPECT_EQ(got, want) << "rank " << rank << " " << category;
    }
  }

  // Steps with the run's losses, and who each rank was, with its clock offset.
  EXPECT_EQ(q.number("SELECT count(*) FROM steps"), 4 * kSteps);
  for (int step = 0; step < kSteps; ++step) {
    const double loss = summary["losses"][step].get<double>();
    EXPECT_NEAR(std::stod(q.rows(fmt::format("SELECT loss FROM steps WHERE rank = 2 AND step = {}",
                                             step))),
                loss, 1e-5 * std::abs(loss));
  }
  EXPECT_EQ(q.rows("SELECT DISTINCT tokens FROM steps"), "32\n");  // 4 sequences x 32 / dp 4
  EXPECT_EQ(q.rows("SELECT count(*), count(clock_offset_ns), count(clock_drift_ppm), "
                   "min(clock_uncertainty_ns) > 0, max(abs(clock_offset_ns)) < 1000000, "
                   "count(DISTINCT pid), min(exit_code), max(exit_code), max(exit_signal), "
                   "min(device) FROM ranks"),
            "4|4|4|1|1|4|0|0|0|cpu\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM stats WHERE severity <> 'info'"), 0)
      << q.rows("SELECT * FROM stats");
  // Each CPU rank measured its core's GeLU tanh rate at start, for recommend --calibrate: any core
  // that runs the suite does between 1 M and 10 G evaluations a second.
  EXPECT_EQ(q.rows("SELECT count(DISTINCT rank), min(value) > 1000000, max(value) < 10000000000 "
                   "FROM stats WHERE name = 'special_function_rate'"),
            "4|1|1\n");
  // And at the end, the FLOP/s its GEMMs achieved over the steps: between 100 MFLOP/s and
  // 10 TFLOP/s on any core that runs the suite.
  EXPECT_EQ(q.rows("SELECT count(DISTINCT rank), min(value) > 100000000, max(value) < "
                   "10000000000000 FROM stats WHERE name = 'gemm_rate'"),
            "4|1|1\n");
  // Timestamps are on one timeline: every rank's first step starts within a second of rank 0's.
  EXPECT_EQ(q.number("SELECT max(ts_ns) - min(ts_ns) < 1000000000 FROM steps WHERE step = 0"), 1);
}

// A device with memory of its own reports it at every step's end: the trace's counters
// device.memory_used_bytes and device.memory_total_bytes, one per rank and step, used at least
// the tracked bytes at that moment. The CPU device's memory is the host's: no such counters.
TEST_F(TraceLaunchTest, DeviceMemoryIsSampledAtEveryStepEnd) {
  constexpr int kSteps = 3;
  const fs::path isolated = dir_ / "isolated.db";
  CommandResult r = run_partrain(fmt::format(
      "-q launch -n 2 --device cpu-isolated --micro-batch 2 --global-batch 4 {} --steps {} "
      "--trace {}",
      kModel, kSteps, isolated.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(isolated);
  EXPECT_EQ(q.rows("SELECT name, count(*), count(DISTINCT rank) FROM counters GROUP BY name "
                   "ORDER BY name"),
            fmt::format("device.memory_total_bytes|{0}|2\ndevice.memory_used_bytes|{0}|2\n",
                        2 * kSteps));
  // Each sample sits after its step's end, and holds at least the model states.
  EXPECT_EQ(q.number("SELECT count(*) FROM counters c JOIN steps s ON s.rank = c.rank "
                     "WHERE c.name = 'device.memory_used_bytes' AND c.ts_ns >= s.ts_ns + s.dur_ns "
                     "AND c.value >= (SELECT max(bytes) FROM memory_events m WHERE m.rank = c.rank "
                     "AND m.category = 'params')"),
            // sample k follows steps 0..k: 1 + 2 + 3 pairs per rank
            2 * kSteps * (kSteps + 1) / 2);
  EXPECT_EQ(q.rows("SELECT DISTINCT device FROM ranks"), "cpu-isolated\n");

  const fs::path cpu = dir_ / "cpu.db";
  r = run_partrain(fmt::format("-q launch -n 1 --micro-batch 2 --global-batch 2 {} --steps 2 "
                               "--trace {}",
                               kModel, cpu.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TraceQuery(cpu).number("SELECT count(*) FROM counters"), 0);
}

TEST_F(TraceLaunchTest, DefaultPathNoTraceAndFailedStatus) {
  // Default: ./partrain-runs/<run-id>.db, named on stderr.
  CommandResult r = run_shell(fmt::format("cd {} && {} launch -n 2 --run-id demo-1 -- true",
                                          dir_.string(), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = dir_ / "partrain-runs" / "demo-1.db";
  EXPECT_TRUE(fs::exists(db)) << r.err;
  EXPECT_NE(r.err.find("partrain-runs/demo-1.db"), std::string::npos) << r.err;
  EXPECT_EQ(TraceQuery(db).rows("SELECT status, run_id FROM runs"), "completed|demo-1\n");
  EXPECT_EQ(TraceQuery(db).rows("SELECT rank, exit_code FROM ranks ORDER BY rank"),
            "0|0\n1|0\n");

  // --no-trace writes nothing.
  r = run_shell(fmt::format("cd {} && {} launch -n 2 --run-id demo-2 --no-trace -- true",
                            dir_.string(), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "partrain-runs" / "demo-2.db"));

  // A failing rank: status failed, naming it; the other rank's exit is recorded too. Rank 1
  // fails half a second in, after rank 0 has ended (else the launcher's SIGTERM could end rank 0,
  // which then has an exit signal and no exit code).
  const fs::path failed = dir_ / "failed.db";
  r = run_partrain(fmt::format(
      "launch -n 2 --trace {} -- sh -c 'test $RANK = 0 || {{ sleep 0.5; exit 7; }}'",
      failed.string()));
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(TraceQuery(failed).rows("SELECT status, failing_rank FROM runs"), "failed|1\n");
  EXPECT_EQ(TraceQuery(failed).rows("SELECT rank, exit_code FROM ranks ORDER BY rank"),
            "0|0\n1|7\n");

  // Contradictory flags are a usage error that names both.
  r = run_partrain(fmt::format("launch -n 1 --trace {} --no-trace -- true",
                               (dir_ / "both.db").string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("either --trace FILE or --no-trace"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "both.db"));

  // An existing file is never overwritten.
  r = run_partrain(fmt::format("launch -n 1 --trace {} -- true", failed.string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
}

// A trace file removed or replaced while the run is traced: the closing line said "trace: FILE
// (N events)" as if the events were there; it now says what became of the file.
TEST_F(TraceLaunchTest, ATraceFileRemovedOrReplacedDuringTheRunIsSaidToBeGone) {
  for (const auto& [name, change, said] :
       {std::tuple{"removed.db", "rm {0}", "removed"},
        std::tuple{"replaced.db", "rm {0} && echo other > {0}", "replaced by another file"}}) {
    const fs::path db = dir_ / name;
    const std::string command = fmt::format(fmt::runtime(change), db.string());
    CommandResult r =
        run_partrain(fmt::format("launch -n 1 --trace {} -- sh -c '{}'", db.string(), command));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(
                  fmt::format("trace {} was {} while the run was traced: the ", db.string(), said)),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("trace: " + db.string() + " ("), std::string::npos) << r.err;
  }
}

// The rendezvous token is a password: the run row's command (and so exports of the trace)
// says REDACTED for it, while the worker's own arguments after `--` stay as typed.
TEST_F(TraceLaunchTest, TheTokenIsLeftOutOfTheRecordedCommand) {
  const fs::path db = dir_ / "token.db";
  CommandResult r = run_partrain(fmt::format(
      "launch -n 1 --token s3cret-value --trace {} -- echo --token visible-arg", db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string command = TraceQuery(db).rows("SELECT command FROM runs");
  EXPECT_EQ(command.find("s3cret-value"), std::string::npos) << command;
  EXPECT_NE(command.find("--token REDACTED"), std::string::npos) << command;
  EXPECT_NE(command.find("--token visible-arg"), std::string::npos) << command;
}

// --nvml-interval reaches every rank (a CUDA rank samples its GPU's counters on it:
// profiler/rank_gpu_counters.h; tests/gpu/trace_gpu_test.cpp checks the counters on a GPU); a
// malformed one, or one with --no-trace, is a usage error naming the fix, before any rank starts.
TEST_F(TraceLaunchTest, NvmlIntervalReachesTheRanksAndIsChecked) {
  CommandResult r = run_partrain(fmt::format(
      "launch -n 2 --no-prefix --trace {} --nvml-interval 20ms -- sh -c "
      "'echo $RANK:$PARTRAIN_NVML_INTERVAL'", (dir_ / "nvml.db").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0:20ms\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1:20ms\n"), std::string::npos) << r.out;

  r = run_partrain(fmt::format("launch -n 1 --trace {} --nvml-interval soon -- true",
                               (dir_ / "bad.db").string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nvml-interval soon: not a duration; give one such as 100ms or 1s"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "bad.db"));

  r = run_partrain("launch -n 1 --no-trace --nvml-interval 1s -- true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("drop it or --no-trace"), std::string::npos) << r.err;
}

// The pipeline's p2p messages (activations forward, their gradients back) move in the type the
// stages keep their activations in: 2048 bf16 values (b s h = 1 x 32 x 64) under the bf16
// recipes, as Megatron's p2p, and fp32 otherwise.
TEST_F(TraceLaunchTest, PipelineBoundariesMoveInTheActivationType) {
  for (const auto& [precision, want] : {std::pair{"fp32", "float|2048|8192\n"},
                                        std::pair{"bf16-mixed", "bfloat16|2048|4096\n"},
                                        std::pair{"bf16-fp32grad", "bfloat16|2048|4096\n"}}) {
    const fs::path db = dir_ / fmt::format("pp-{}.db", precision);
    CommandResult r = run_partrain(fmt::format(
        "-q launch -n 2 --pp 2 --micro-batch 1 --global-batch 4 {} --steps 1 --precision {} "
        "--trace {}",
        kModel, precision, db.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    TraceQuery q(db);
    EXPECT_EQ(q.rows("SELECT DISTINCT dtype, count, bytes FROM collectives "
                     "WHERE op IN ('send', 'recv')"),
              want)
        << precision;
    EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE op = 'send'"), 8) << precision;
  }
}

// Sequence parallelism gathers the saved layernorm outputs in the activations' type: under bf16,
// per step two per block forward and two backward (ln1, ln2) and one each way for the final norm,
// each rank's 2048 bf16 values (b s h / t = 2 x 32 x 64 / 2); the gradients' gathers stay fp32.
TEST_F(TraceLaunchTest, SequenceParallelGathersBf16ActivationsInBf16) {
  const fs::path db = dir_ / "sp-bf16.db";
  CommandResult r = run_partrain(fmt::format(
      "-q launch -n 2 --tp 2 --sp --micro-batch 2 --global-batch 2 {} --steps 2 --precision bf16 "
      "--trace {}",
      kModel, db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(db);
  EXPECT_EQ(q.rows("SELECT dtype, count, count(*) FROM collectives WHERE rank = 0 AND "
                   "op = 'all_gather' AND count = 2048 GROUP BY dtype ORDER BY dtype"),
            "bfloat16|2048|20\nfloat|2048|10\n");
}

// Pipeline stages: every send is paired with exactly one recv on its peer (world ranks, same
// comm_id and per-pair seq, same bytes), and each stage records its forward/backward actions.
TEST_F(TraceLaunchTest, PipelineSendsPairWithRecvs) {
  const fs::path db = dir_ / "pp.db";
  CommandResult r = run_partrain(fmt::format(
      "-q launch -n 4 --dp 2 --pp 2 --micro-batch 1 --global-batch 8 {} --steps 2 --trace {}",
      kModel, db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(db);
  const int64_t sends = q.number("SELECT count(*) FROM collectives WHERE op = 'send'");
  EXPECT_GT(sends, 0);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives s JOIN collectives r ON "
                     "r.comm_id = s.comm_id AND r.seq = s.seq AND r.op = 'recv' AND "
                     "r.rank = s.peer AND r.peer = s.rank AND r.bytes = s.bytes "
                     "WHERE s.op = 'send'"),
            sends);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE op = 'recv'"), sends);
  // 4 micro-batches per dp replica: each stage runs 4 forwards and 4 backwards per step.
  EXPECT_EQ(q.rows("SELECT DISTINCT count(*) FROM slices WHERE name IN ('forward', 'backward') "
                   "GROUP BY rank, step, name"),
            "4\n");

  // The real run exported: one X event per slice, one process per rank, every flow paired, an
  // arrow for every send.
  const fs::path json_path = dir_ / "pp.json";
  r = run_partrain(fmt::format("export --format chrome {} -o {}", db.string(), json_path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(read_file(json_path.string()), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  std::map<std::string, int64_t> by_phase;
  std::set<int> pids;
  std::map<int64_t, std::pair<int, int>> flows;  // id -> (starts, finishes)
  int64_t p2p_flows = 0;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    ++by_phase[ph];
    pids.insert(e["pid"].get<int>());
    if (ph == "s") {
      ++flows[e["id"].get<int64_t>()].first;
      if (e["cat"] == "p2p") ++p2p_flows;
    }
    if (ph == "f") ++flows[e["id"].get<int64_t>()].second;
  }
  EXPECT_EQ(by_phase["X"], q.number("SELECT count(*) FROM slices"));
  EXPECT_EQ(by_phase["C"], q.number("SELECT count(*) FROM memory_events"));
  EXPECT_EQ(pids, (std::set<int>{1, 2, 3, 4}));
  for (const auto& [id, ends] : flows) EXPECT_EQ(ends, std::make_pair(1, 1)) << "flow " << id;
  EXPECT_EQ(p2p_flows, sends);
  EXPECT_EQ(doc["distributedInfo"]["world_size"], 4);
  EXPECT_EQ(doc["distributedInfo"]["backend"], "gloo");
}

// Two launchers on one machine as two nodes of 2 ranks: each node writes its own file of its own
// ranks, and `partrain merge` joins them into one run whose collectives match over all 4 ranks.
TEST_F(TraceLaunchTest, EachNodeWritesItsFileAndMergeJoinsThem) {
  const std::string launch = fmt::format(
      "{} -q launch --nnodes 2 --master-addr 127.0.0.1 --master-port {} -n 2 --rdzv-timeout 60s "
      "--token t0k3n --trace {} --strategy ddp --micro-batch 1 {} --steps 2",
      PARTRAIN_BINARY, free_tcp_port(), (dir_ / "run.db").string(), kModel);
  CommandResult r = run_shell(launch + " --node-rank 1 >" + (dir_ / "node1.out").string() +
                              " 2>&1 & " + launch + " --node-rank 0; status=$?; wait; exit $status");
  ASSERT_EQ(r.exit_code, 0) << r.err << read_file((dir_ / "node1.out").string());
  ASSERT_TRUE(fs::exists(dir_ / "run.node1.db"));
  EXPECT_EQ(TraceQuery(dir_ / "run.db").rows("SELECT group_concat(rank) FROM ranks"), "0,1\n");
  EXPECT_EQ(TraceQuery(dir_ / "run.node1.db").rows("SELECT group_concat(rank) FROM ranks"),
            "2,3\n");
  EXPECT_EQ(TraceQuery(dir_ / "run.node1.db").rows("SELECT status FROM runs"), "completed\n");

  r = run_partrain(fmt::format("merge {} {} -o {}", (dir_ / "run.db").string(),
                               (dir_ / "run.node1.db").string(), (dir_ / "all.db").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery all(dir_ / "all.db");
  EXPECT_EQ(all.rows("SELECT status, world_size FROM runs"), "completed|4\n");
  EXPECT_EQ(all.number("SELECT count(*) FROM steps"), 8);
  EXPECT_EQ(all.rows("SELECT DISTINCT count(*) FROM collectives WHERE comm_id = "
                     "(SELECT comm_id FROM collectives WHERE group_size = 4 LIMIT 1) "
                     "GROUP BY seq"),
            "4\n");
}

TEST_F(TraceLaunchTest, SigkillOfTheLauncherLeavesAnIncompleteIntactTrace) {
  const fs::path db = dir_ / "killed.db";
  // Its own temporary and runtime directories, to see what the killed launcher leaves there.
  const fs::path temp = dir_ / "tmp";
  const fs::path runtime = dir_ / "run";
  fs::create_directories(temp);
  fs::create_directories(runtime);
  const std::string env = fmt::format("TMPDIR={} XDG_RUNTIME_DIR={}", temp.string(),
                                      runtime.string());
  const std::string args = fmt::format(
      "launch -n 2 --strategy ddp --micro-batch 2 {} --steps 100000 --trace {}", kModel,
      db.string());
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::setpgid(0, 0);  // its own group, so the test can clean up every worker afterwards
    std::freopen("/dev/null", "w", stdout);
    std::freopen((dir_ / "launcher.err").c_str(), "w", stderr);
    ::execl("/bin/sh", "sh", "-c", (env + " " + PARTRAIN_BINARY + " " + args).c_str(),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until some steps are committed (readers see them while the run is live: WAL). The file
  // exists a moment before its schema does, so it is polled without failing on that.
  int64_t committed = 0;
  for (int i = 0; i < 600 && committed < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    committed = poll_number(db, "SELECT count(*) FROM step").value_or(0);
  }
  ASSERT_GE(committed, 4) << read_file((dir_ / "launcher.err").string());
  EXPECT_EQ(TraceQuery(db).rows("SELECT status FROM runs"), "running\n");
  ::kill(-launcher, SIGKILL);  // the launcher (and the shell); workers die with their parent
  int status = 0;
  ::waitpid(launcher, &status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Opened through partrain (export reads the trace): the run is marked incomplete.
  CommandResult r = run_partrain(fmt::format("export --format chrome {} -o {}", db.string(),
                                             (dir_ / "killed.json").string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(db);
  EXPECT_EQ(q.rows("PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "incomplete\n");
  EXPECT_GE(q.number("SELECT count(*) FROM step"), committed);
  EXPECT_GT(q.number("SELECT count(*) FROM collectives"), 0);

  // It left its flight-dump and collector directories; the next launcher removes them.
  EXPECT_EQ(std::distance(fs::directory_iterator(temp), fs::directory_iterator()), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(runtime / "partrain"), fs::directory_iterator()),
            1);
  r = run_partrain(fmt::format("launch -n 1 {} --steps 1 --no-trace", kModel), env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::distance(fs::directory_iterator(temp), fs::directory_iterator()), 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(runtime / "partrain"), fs::directory_iterator()),
            0);
}

// What a run whose trace fills up must show: training to the end (exit 0, the summary), one
// notice, a closing line with the count, and a readable trace that says it stopped.
void expect_tracing_stopped_and_run_went_on(const CommandResult& r, const fs::path& db,
                                            std::string_view reason) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("[rank 0] loss:"), std::string::npos)
      << "training went on: " << r.out << r.err;
  const std::string notice = std::string(reason) + ": tracing stops here and the run goes on";
  const size_t first = r.err.find(notice);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(notice, first + 1), std::string::npos) << "said once: " << r.err;
  EXPECT_NE(r.err.find("tracing stopped early (" + std::string(reason) + "): "),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db.string() + "-reserve"));
  EXPECT_FALSE(fs::exists(db.string() + "-writer"));

  TraceQuery q(db);
  EXPECT_EQ(q.rows("PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "completed\n");
  EXPECT_GT(q.number("SELECT value FROM stats WHERE name = 'trace_stopped'"), 0);
  EXPECT_GT(q.number("SELECT count(*) FROM step"), 0) << "what came before the stop is kept";
  EXPECT_EQ(q.number("SELECT count(*) FROM rank WHERE exit_code = 0"), 4)
      << "the ranks' exits are stored after the stop";

  CommandResult analyzed = run_partrain("analyze --json " + db.string());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  nlohmann::json report = nlohmann::json::parse(analyzed.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << analyzed.out;
  int data_loss_findings = 0;
  for (const auto& finding : report["findings"]) data_loss_findings += finding["kind"] == "trace_data_loss";
  EXPECT_EQ(data_loss_findings, 1) << report["findings"].dump();
  ASSERT_EQ(report["data_loss"].size(), 1u) << report["data_loss"].dump();
  EXPECT_EQ(report["data_loss"][0]["name"], "trace_stopped");
  // The text report says so in its header, above every section computed from what is left.
  analyzed = run_partrain("analyze " + db.string());
  EXPECT_EQ(analyzed.out.find("the trace is missing events: trace_stopped = "),
            analyzed.out.find('\n', analyzed.out.find("window:")) + 1) << analyzed.out;
}

constexpr int kLongRunSteps = 100;  // its trace (about 1.5 MiB) outgrows 1 MiB before the end

TEST_F(TraceLaunchTest, TraceMaxSizeStopsTracingAndTheRunGoesOn) {
  const fs::path db = dir_ / "capped.db";
  CommandResult r = run_partrain(fmt::format("launch -n 4 {} --steps {} --trace {} "
                                             "--trace-max-size 1M", kModel, kLongRunSteps,
                                             db.string()));
  expect_tracing_stopped_and_run_went_on(r, db, "the disk is full or the trace reached its size "
                                                "limit of 1048576 bytes");
  EXPECT_LE(fs::file_size(db), uint64_t{1} << 21) << "the limit (and the stop's notice) at most";

  CommandResult bad = run_partrain(fmt::format("launch -n 2 {} --trace-max-size 10K", kModel));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--trace-max-size 10K: a trace needs at least 1M"), std::string::npos)
      << bad.err;
}

// A launch of kLongRunSteps steps tracing into a tmpfs of `size` (and `options` more, e.g.
// nr_inodes) mounted in a private namespace (unshare, where user namespaces are allowed), of
// which a file takes all but `left` KiB (0: none); the trace file alone is copied out to
// dir/copied.db and the tmpfs's listing to dir/left.txt before the namespace goes. nullopt (the
// test skips) where no such mount is permitted.
std::optional<CommandResult> launch_on_tmpfs(const fs::path& dir, std::string_view size,
                                             int left = 0, std::string_view options = "") {
  const fs::path mount = dir / "small";
  fs::create_directories(mount);
  if (run_shell("unshare -rm sh -c 'mount -t tmpfs tmpfs " + mount.string() + "'").exit_code != 0) {
    return std::nullopt;
  }
  const fs::path db = mount / "full.db";
  const std::string fill =
      left == 0 ? "true"
                : fmt::format(
                      "dd if=/dev/zero of={0}/filler bs=1K status=none count=$(($(df "
                      "--output=avail -k {0} | tail -1) - {1}))",
                      mount.string(), left);
  return run_shell(fmt::format(
      "unshare -rm sh -c 'mount -t tmpfs -o size={6}{7} tmpfs {0} && {8} && {1} launch -n 4 {2} "
      "--steps {3} --trace {4}; code=$?; cp {4} {5}/copied.db; ls {0} > {5}/left.txt; exit $code'",
      mount.string(), partrain_binary(), kModel, kLongRunSteps, db.string(), dir.string(), size,
      options, fill));
}

// A real full disk: a 5 MiB tmpfs, of which the writer's reserve takes 4 MiB.
TEST_F(TraceLaunchTest, FullDiskStopsTracingAndTheRunGoesOn) {
  std::optional<CommandResult> r = launch_on_tmpfs(dir_, "5m");
  if (!r) GTEST_SKIP() << "unshare -rm with a tmpfs mount is not permitted here: no small disk";
  // The tmpfs is gone with the namespace: the trace was copied out of it before.
  expect_tracing_stopped_and_run_went_on(*r, dir_ / "copied.db", "the disk is full");
  EXPECT_EQ(read_file((dir_ / "left.txt").string()), "full.db\n") << "no reserve, lock, WAL left";
}

// A disk smaller than the 4 MiB reserve (a 2 MiB tmpfs): the writer holds a quarter of the free
// space in reserve and keeps its write-ahead log within half of it, so the stop still checkpoints
// and marks the trace. It ended `running` with its data in the log only (the main file 8 KiB:
// "truncated or corrupted" once copied without it).
TEST_F(TraceLaunchTest, ADiskSmallerThanTheReserveStillEndsCheckpointedAndMarked) {
  std::optional<CommandResult> r = launch_on_tmpfs(dir_, "2m");
  if (!r) GTEST_SKIP() << "unshare -rm with a tmpfs mount is not permitted here: no small disk";
  // Only the main file was copied out: everything must be in it.
  expect_tracing_stopped_and_run_went_on(*r, dir_ / "copied.db", "the disk is full");
  EXPECT_EQ(read_file((dir_ / "left.txt").string()), "full.db\n") << "no reserve, lock, WAL left";
}

// A trace in WAL mode (a reader held it at its close) on a read-only mount: SQLite cannot make
// the -shm it reads a WAL-mode file through, and analyze said "truncated or corrupted" (exit 3)
// for an intact trace. With no log beside it, it is read as an immutable file.
TEST_F(TraceLaunchTest, AnIntactTraceOnAReadOnlyMountIsRead) {
  const fs::path place = dir_ / "ro";
  fs::create_directories(place);
  const fs::path db = place / "w.db";
  CommandResult r =
      run_partrain(fmt::format("launch -n 2 {} --steps 2 --trace {}", kModel, db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(run_shell(fmt::format("python3 -c \"import sqlite3; "
                                  "sqlite3.connect('{}').execute('PRAGMA journal_mode=WAL')\"",
                                  db.string()))
                .exit_code,
            0);
  CommandResult read = run_shell(
      fmt::format("unshare -rm sh -c 'mount --bind -o ro {0} {0} || exit 99; {1} analyze {2}'",
                  place.string(), partrain_binary(), db.string()));
  if (read.exit_code == 99 || read.err.find("unshare") != std::string::npos) {
    GTEST_SKIP() << "unshare -rm with a bind mount is not permitted here: " << read.err;
  }
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_NE(read.out.find("(completed), world size 2"), std::string::npos) << read.out;
  EXPECT_EQ(read.err.find("corrupted"), std::string::npos) << read.err;
  // Run from there, the default trace directory cannot be made: say what to pass instead.
  CommandResult launched = run_shell(fmt::format(
      "unshare -rm sh -c 'mount --bind -o ro {0} {0} && cd {0} && {1} launch -n 1 {2} --steps 1'",
      place.string(), partrain_binary(), kModel));
  EXPECT_EQ(launched.exit_code, 1) << launched.err;
  EXPECT_NE(launched.err.find("cannot create the trace directory partrain-runs: Read-only file "
                              "system: pass --trace FILE in a directory you can write, or "
                              "--no-trace"),
            std::string::npos)
      << launched.err;
}

// A nearly full disk with just the room a trace needs (1 MiB, DiskReserve::kMinFreeBytes, and a
// little): the least reserve, 512 KiB, still closes it. With 450 KiB free the writer held no
// reserve and the whole trace was lost (status `running`, no ranks, "committing ... database or
// disk is full"); with 600-850 KiB and a 64 KiB reserve, 8 closes of 12 failed so.
TEST_F(TraceLaunchTest, ANearlyFullDiskWithRoomForATraceStillEndsCheckpointedAndMarked) {
  std::optional<CommandResult> r = launch_on_tmpfs(dir_, "4m", 1100);
  if (!r) GTEST_SKIP() << "unshare -rm with a tmpfs mount is not permitted here: no small disk";
  EXPECT_NE(r->err.find("little space on its filesystem"), std::string::npos)
      << "warned at the start: " << r->err;
  expect_tracing_stopped_and_run_went_on(*r, dir_ / "copied.db", "the disk is full");
  EXPECT_EQ(read_file((dir_ / "left.txt").string()), "filler\nfull.db\n")
      << "no reserve, lock, WAL left";
}

// With less than that free, tracing is refused before anything runs or is written, saying what
// to do; the run is not started (exit 1, as for a port in use).
TEST_F(TraceLaunchTest, ADiskTooFullToCloseATraceIsRefusedAtTheStart) {
  std::optional<CommandResult> r = launch_on_tmpfs(dir_, "4m", 450);
  if (!r) GTEST_SKIP() << "unshare -rm with a tmpfs mount is not permitted here: no small disk";
  EXPECT_EQ(r->exit_code, 1) << r->err;
  EXPECT_NE(r->err.find("free, and a trace needs at least 1.00 MiB to be closed properly"),
            std::string::npos)
      << r->err;
  EXPECT_NE(r->err.find("(--trace FILE), or run without a trace (--no-trace)"), std::string::npos)
      << r->err;
  EXPECT_EQ(r->err.find("[rank 0] loss:"), std::string::npos) << "no rank started: " << r->err;
  EXPECT_EQ(read_file((dir_ / "left.txt").string()), "filler\n") << "nothing made beside it";
}

// A trace SQLite cannot create for want of space (here of inodes: the root, the writer's lock, the
// reserve and the trace take the 4 there are, and its -wal cannot be made) is
// said to be a full disk, not "unable to open database file", and leaves no file behind that
// would refuse the retry as "already exists".
TEST_F(TraceLaunchTest, ATraceThatCannotBeCreatedOnAFullDiskLeavesNothing) {
  std::optional<CommandResult> r = launch_on_tmpfs(dir_, "4m", 0, ",nr_inodes=4");
  if (!r) GTEST_SKIP() << "unshare -rm with a tmpfs mount is not permitted here: no small disk";
  EXPECT_EQ(r->exit_code, 1) << r->err;
  EXPECT_NE(
      r->err.find("creating trace " + (dir_ / "small" / "full.db").string() + ": the disk is full"),
      std::string::npos)
      << r->err;
  EXPECT_EQ(read_file((dir_ / "left.txt").string()), "") << "no stub of the trace left";
}

}  // namespace
}  // namespace partrain::testing
