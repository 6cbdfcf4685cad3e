// NCCL interposition under `partrain trace`: a C program linked against a fake libnccl.so.2 runs
// as two ranks with libpartrain_inject.so preloaded. Every call reaches the fake with the
// program's own arguments, results come back unchanged, and the trace holds each collective and
// transfer with its communicator, sequence number, sizes, peer and group semantics. Where NVML
// is installed (a stand-in libnvidia-ml.so.1 here), each rank's GPU counters are sampled too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The calls the program says it made, as the fake would log them ("call X args" -> "X args").
std::vector<std::string> calls_made(const std::string& program_output) {
  std::vector<std::string> calls;
  for (const std::string& line : lines_of(program_output)) {
    if (line.rfind("call ", 0) == 0) calls.push_back(line.substr(5));
  }
  return calls;
}

// The calls the fake received, less those the program does not print: ncclGetUniqueId, and the
// ncclBroadcast the fake's own ncclBcast makes underneath.
std::vector<std::string> calls_received(const std::string& fake_log) {
  std::vector<std::string> calls;
  for (const std::string& line : lines_of(fake_log)) {
    if (line.rfind("ncclGetUniqueId", 0) == 0) continue;
    if (line.rfind("ncclBroadcast send=0xb0000", 0) == 0) continue;
    calls.push_back(line);
  }
  return calls;
}

class NcclInterposeTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (scratch_.path() / name).string(); }

  // Runs both ranks of the program under `partrain trace`; `rank_env` says how each process
  // learns its rank ("RANK={} WORLD_SIZE=2", or nothing: from ncclCommInitRank).
  // `program`: the program linked against libnccl, or the one that opens it privately.
  // `tracer`: how partrain runs the shell that starts them ("trace -o FILE", or a launcher's
  // rank: "launch -n 1 --trace FILE").
  CommandResult trace_two_ranks(const std::string& trace, const std::string& rank_env,
                                const char* program = FAKE_NCCL_PROGRAM,
                                const std::string& tracer = "trace -o {}") {
    std::string ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks += fmt::format("FAKE_NCCL_LOG={} {} {} {} 2 >{} & ", path(fmt::format("fake{}.log", rank)),
                           fmt::format(fmt::runtime(rank_env), rank), program, rank,
                           path(fmt::format("out{}", rank)));
    }
    return run_partrain(
        fmt::format("{} -- sh -c '{}wait'", fmt::format(fmt::runtime(tracer), trace), ranks),
        "FAKE_NCCL_FAIL=ncclReduce FAKE_NCCL_ID=job42 env -u RANK -u WORLD_SIZE");
  }

  // Both ranks' programs: results passed through (ncclReduce's error came back, everything else
  // succeeded), and the fake saw exactly the calls, in the order and with the arguments, the
  // program made.
  void expect_calls_reached_nccl_unchanged() const {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string out = read_file(path(fmt::format("out{}", rank)));
      EXPECT_NE(out.find("result ncclReduce 4\n"), std::string::npos) << out;
      EXPECT_NE(out.find(fmt::format("done rank {}: all results as expected", rank)),
                std::string::npos)
          << out;
      const std::vector<std::string> made = calls_made(out);
      ASSERT_EQ(made.size(), 21u) << out;
      EXPECT_EQ(calls_received(read_file(path(fmt::format("fake{}.log", rank)))), made);
    }
  }

  ScratchDir scratch_;
};

TEST_F(NcclInterposeTest, EveryCallReachesNcclUnchangedAndIsRecorded) {
  const std::string trace = path("nccl.db");
  CommandResult r = trace_two_ranks(trace, "RANK={} WORLD_SIZE=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_calls_reached_nccl_unchanged();

  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "completed\n");
  EXPECT_EQ(q.rows("SELECT rank FROM ranks ORDER BY rank"), "0\n1\n");
  // Both ranks name each communicator alike; the split child is the parent's id + split number.
  EXPECT_EQ(q.number("SELECT count(DISTINCT comm_id) FROM collectives"), 2);
  EXPECT_EQ(q.number("SELECT count(*) FROM (SELECT comm_id FROM collectives GROUP BY comm_id "
                     "HAVING count(DISTINCT rank) = 2)"),
            2);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE comm_id NOT LIKE 'nccl-%'"), 0);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE comm_id LIKE 'nccl-%.split0.c0'"), 4);

  // Rank 0's calls in the order they were issued (a group's at its outermost ncclGroupEnd):
  // op, seq, dtype, count, nccl-tests bytes, peer/root (world ranks), reduce op, comm rank,
  // communicator size, state. The rejected ncclReduce is no collective.
  EXPECT_EQ(q.rows("SELECT comm_id LIKE '%split%', seq, op, dtype, count, bytes, peer, reduce_op, "
                   "comm_rank, group_size, group_ranks, state FROM collectives WHERE rank = 0 "
                   "ORDER BY slice_id"),
            "0|0|all_reduce|float|1024|4096|NULL|sum|0|2|0,1|completed\n"
            "0|1|all_reduce|bfloat16|4096|8192|NULL|sum|0|2|0,1|completed\n"
            "0|0|send|bfloat16|256|512|1|NULL|0|2|0,1|completed\n"
            "0|0|recv|bfloat16|256|512|1|NULL|0|2|0,1|completed\n"
            "0|2|all_gather|half|100|400|NULL|NULL|0|2|0,1|completed\n"
            "0|3|reduce_scatter|int32|50|400|NULL|max|0|2|0,1|completed\n"
            "0|4|broadcast|int64|10|80|0|NULL|0|2|0,1|completed\n"
            "0|5|broadcast|uint8|12|12|1|NULL|0|2|0,1|completed\n"
            "1|0|all_reduce|double|8|64|NULL|avg|0|2|0,1|completed\n"
            "1|1|broadcast|float|16|64|0|NULL|0|2|0,1|completed\n");
  EXPECT_EQ(q.rows("SELECT seq, op, peer FROM collectives WHERE rank = 1 AND op IN "
                   "('send', 'recv') ORDER BY op"),
            "0|recv|0\n0|send|0\n");
  // Group semantics: a group's calls end together, when its outermost ncclGroupEnd returns.
  EXPECT_EQ(q.number("SELECT count(DISTINCT ts_ns + dur_ns) FROM collectives WHERE rank = 0 "
                     "AND op IN ('send', 'recv')"),
            1);
  EXPECT_EQ(q.number("SELECT count(DISTINCT ts_ns + dur_ns) FROM collectives WHERE rank = 0 "
                     "AND comm_id LIKE '%split%'"),
            1);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE rank = 0 AND comm_id LIKE '%split%' "
                     "AND op = 'all_reduce' AND dur_ns > (SELECT dur_ns FROM collectives WHERE "
                     "rank = 0 AND comm_id LIKE '%split%' AND op = 'broadcast')"),
            1);
  // Communicator lifecycle (a split on its child's track) and the rejected call.
  EXPECT_EQ(q.rows("SELECT track LIKE '%split%', name FROM slices WHERE rank = 0 AND "
                   "track_kind = 'comm' AND category = 'phase' ORDER BY slice_id"),
            "0|ncclCommInitRank\n"
            "0|reduce -> ncclInvalidArgument\n"
            "1|ncclCommSplit\n"
            "1|ncclCommDestroy\n"
            "0|ncclCommDestroy\n");
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'nccl_failed_calls' ORDER BY rank"),
            "0|1\n1|1\n");
}

// PyTorch's libnccl is a dependency of a library Python opens with RTLD_LOCAL: outside the global
// scope that dlsym(RTLD_NEXT) searches. The calls still land in the wrappers, which find the real
// functions in that private libnccl: every call reaches it unchanged and is recorded.
TEST_F(NcclInterposeTest, ALibncclLoadedPrivatelyIsFoundAndCalled) {
  const std::string trace = path("private.db");
  CommandResult r = trace_two_ranks(trace, "RANK={} WORLD_SIZE=2", FAKE_NCCL_DLOPEN_PROGRAM);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("no libnccl is loaded"), std::string::npos) << r.err;
  expect_calls_reached_nccl_unchanged();
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank"),
            "0|10\n1|10\n");
}

// NCCL exports every entry point under a second, profiling name (pncclX: in libnccl the function
// itself, ncclX its alias). Calls by that name reach the library unchanged and are recorded as
// the public ones are: the sequence numbers go on, and the group ends at pncclGroupEnd.
TEST_F(NcclInterposeTest, CallsByTheProfilingNamesAreRecordedLikeThePublicOnes) {
  const std::string trace = path("pnccl.db");
  CommandResult r = trace_two_ranks(trace, "FAKE_NCCL_PROFILING_NAMES=1 RANK={} WORLD_SIZE=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string out = read_file(path(fmt::format("out{}", rank)));
    EXPECT_NE(out.find(fmt::format("done rank {}: all results as expected", rank)),
              std::string::npos)
        << out;
    const std::vector<std::string> made = calls_made(out);
    ASSERT_EQ(made.size(), 21u + 5u) << out;
    EXPECT_EQ(calls_received(read_file(path(fmt::format("fake{}.log", rank)))), made);
  }
  TraceQuery q(trace);
  // Rank 0's world calls after the public ones (all-reduce seq 0-1, broadcasts up to 5, the
  // first exchange's transfers seq 0): the second exchange and the all-reduce by pnccl names.
  EXPECT_EQ(q.rows("SELECT seq, op, count, peer FROM collectives WHERE rank = 0 AND comm_id NOT "
                   "LIKE '%split%' ORDER BY slice_id DESC LIMIT 3"),
            "6|all_reduce|32|NULL\n1|recv|256|1\n1|send|256|1\n");
  EXPECT_EQ(q.number("SELECT count(DISTINCT ts_ns + dur_ns) FROM collectives WHERE rank = 0 AND "
                     "op IN ('send', 'recv') AND seq = 1"),
            1);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 2 * (10 + 3));
}

TEST_F(NcclInterposeTest, RanksComeFromNcclCommInitRankWithoutLauncherVariables) {
  const std::string trace = path("ranks.db");
  CommandResult r = trace_two_ranks(trace, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, pid > 0 FROM ranks ORDER BY rank"), "0|1\n1|1\n");
  // The members' world ranks are unknown here: the size is kept, peers stay communicator ranks.
  EXPECT_EQ(q.rows("SELECT rank, op, peer, group_size, group_ranks IS NULL FROM collectives "
                   "WHERE op IN ('send', 'recv') ORDER BY rank, op"),
            "0|recv|1|2|1\n0|send|1|2|1\n1|recv|0|2|1\n1|send|0|2|1\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 20);
}

// A rank started through a shell wrapper (`partrain launch -- ./run.sh`, run.sh running the
// program as its child, as clusters' scripts do): the shell is the rank at load, and the
// program, whose parent holds the same RANK, takes the rank over at its first ncclCommInitRank.
// It had been taken for the shell's helper: no collective in the trace, the shell's pid the
// rank's.
TEST_F(NcclInterposeTest, AProgramAShellWrapperRunsTakesTheRankOver) {
  const fs::path wrapper = scratch_.path() / "run.sh";
  std::ofstream(wrapper) << fmt::format(
      "#!/bin/sh\necho \"wrapper on rank $RANK\"\n\"$@\" & echo $! > '{}'/program$RANK.pid\n"
      "wait $!\n",
      scratch_.path().string());
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string trace = path("wrapped.db");
  CommandResult r = trace_two_ranks(trace, "RANK={} WORLD_SIZE=2 " + wrapper.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_calls_reached_nccl_unchanged();
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank"),
            "0|10\n1|10\n");
  EXPECT_EQ(
      q.rows("SELECT rank, pid FROM ranks ORDER BY rank"),
      fmt::format("0|{}1|{}", read_file(path("program0.pid")), read_file(path("program1.pid"))));
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'rank_process_taken_over' "
                   "ORDER BY rank"),
            "0|1\n1|1\n");
}

// A wrapped program's first communicator need not be the world: its rank in it (0 of a 1-rank
// communicator here) is no world rank, and the rank the wrapper was given stays the rank. Only
// c10d's world rank overrides an inherited launcher variable (mp.spawn's processes under an
// sbatch script's SLURM_PROCID, trace_subprocess_torch_test.cpp).
TEST_F(NcclInterposeTest, AWrappedProgramsCommunicatorRankDoesNotReplaceItsLauncherRank) {
  const std::string trace = path("sub_comm.db");
  CommandResult r =
      run_partrain(fmt::format("trace -o {} -- sh -c '\"$0\" 0 1 >{}' {}", trace, path("out"),
                               FAKE_NCCL_PROGRAM),
                   "FAKE_NCCL_ID=job43 FAKE_NCCL_LOG=" + path("fake.log") + " RANK=1 WORLD_SIZE=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank FROM ranks"), "1\n");
  EXPECT_EQ(q.rows("SELECT DISTINCT rank FROM collectives"), "1\n");
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'rank_process_taken_over'"),
            "1|1\n");
}

// A launcher under `partrain launch` (`partrain launch -n 1 -- torchrun --nproc-per-node 2`, here
// a shell starting both ranks): the inner launcher holds RANK=0 from the outer one, so its own
// rank 0 was taken for its helper and never recorded (analyze then blamed rank 0 for every
// collective). That rank takes rank 0 over at its first communicator.
TEST_F(NcclInterposeTest, TheRanksOfALauncherUnderLaunchAreRecorded) {
  const std::string trace = path("nested.db");
  CommandResult r =
      trace_two_ranks(trace, "RANK={} WORLD_SIZE=2", FAKE_NCCL_PROGRAM, "launch -n 1 --trace {}");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_calls_reached_nccl_unchanged();
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank"),
            "0|10\n1|10\n");
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'rank_process_taken_over'"),
            "0|1\n");
}

TEST_F(NcclInterposeTest, WithoutAGpuCudaInitialisationLeavesOneNoticeAndNcclTracing) {
  const std::string trace = path("nogpu.db");
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 {} 0 1", trace, FAKE_NCCL_PROGRAM),
      fmt::format("FAKE_CUDA_INIT=1 FAKE_NCCL_LOG={} env -u RANK", path("fake.log")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("InitializeInjection ok\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done rank 0: all results as expected"), std::string::npos) << r.out;
  // One notice naming what is lost and what goes on (no GPU, no driver: CUPTI cannot start).
  const std::string notice = "GPU kernels are not recorded; NCCL calls still are";
  const size_t first = r.err.find(notice);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(notice, first + 1), std::string::npos) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 11);  // ncclReduce succeeds here
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE gpu_start_ns IS NOT NULL"), 0);
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 0);
}

TEST_F(NcclInterposeTest, ProgramWithoutNcclOrCudaRunsUnchanged) {
  const std::string command =
      "sh -c 'printf \"%s\\n\" b a c | sort; echo \"to stderr\" >&2; exit 7'";
  CommandResult plain = run_shell(command);
  CommandResult traced =
      run_partrain(fmt::format("trace -o {} -- {}", path("plain.db"), command), "RANK=0");
  EXPECT_EQ(plain.exit_code, 7);
  EXPECT_EQ(traced.exit_code, 7);
  EXPECT_EQ(plain.out, "a\nb\nc\n");
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_NE(traced.err.find("to stderr"), std::string::npos) << traced.err;
  TraceQuery q(path("plain.db"));
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 0);
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "failed\n");
}

// NVML, where a driver is (here the stand-in libnvidia-ml.so.1 on LD_LIBRARY_PATH): the rank
// samples its GPU, CUDA_VISIBLE_DEVICES[LOCAL_RANK] in NVML's numbering, at once, every
// --nvml-interval and at exit, into the counters view and the Chrome export.
TEST_F(NcclInterposeTest, GpuCountersAreSampledThroughNvmlWhereItIsInstalled) {
  const std::string trace = path("nvml.db");
  const std::string rank = fmt::format(
      "env RANK=0 WORLD_SIZE=1 LOCAL_RANK=1 CUDA_VISIBLE_DEVICES=3,5 {} 0 1", FAKE_NCCL_PROGRAM);
  const std::string nvml =
      fmt::format("LD_LIBRARY_PATH={} FAKE_NVML_LOG={}", FAKE_NVML_DIR, path("nvml.log"));
  CommandResult r = run_partrain(
      fmt::format("trace -o {} --nvml-interval 20ms -- {}", trace, rank), nvml + " env -u RANK");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(path("nvml.log")), "handle 5\n");
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT name, min(value), max(value), count(*) >= 2 FROM counters "
                   "WHERE rank = 0 GROUP BY name ORDER BY name"),
            "gpu5.power_w|412.345|412.345|1\n"
            "gpu5.sm_clock_mhz|1980.0|1980.0|1\n"
            "gpu5.throttle_reasons|4.0|4.0|1\n"
            "gpu5.utilization_pct|42.0|42.0|1\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM counters c, runs r WHERE c.ts_ns < r.start_ns OR "
                     "c.ts_ns > r.end_ns"),
            0) << "samples lie within the run";

  CommandResult exported = run_partrain(fmt::format("export --format chrome {} -o {}", trace,
                                                    path("nvml.json")));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const std::string json = read_file(path("nvml.json"));
  EXPECT_NE(json.find(R"("name":"gpu5.sm_clock_mhz","cat":"counter","args":{"value":1980})"),
            std::string::npos) << json.substr(0, 2000);

  // What the device does not report is left out; --nvml-interval 0 samples nothing.
  r = run_partrain(fmt::format("trace -o {} -- {}", path("nopower.db"), rank),
                   nvml + " FAKE_NVML_NO_POWER=1 env -u RANK");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TraceQuery(path("nopower.db")).rows("SELECT DISTINCT name FROM counters ORDER BY name"),
            "gpu5.sm_clock_mhz\ngpu5.throttle_reasons\ngpu5.utilization_pct\n");
  r = run_partrain(fmt::format("trace -o {} --nvml-interval 0 -- {}", path("off.db"), rank),
                   nvml + " env -u RANK");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TraceQuery(path("off.db")).number("SELECT count(*) FROM counters"), 0);
}

TEST_F(NcclInterposeTest, NvmlThatCannotStartIsSaidOnceAndTracingGoesOn) {
  const std::string trace = path("nvml_broken.db");
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 {} 0 1", trace, FAKE_NCCL_PROGRAM),
      fmt::format("LD_LIBRARY_PATH={} FAKE_NVML_INIT_ERROR=999 env -u RANK", FAKE_NVML_DIR));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string notice = "rank 0: NVML cannot be initialised: fake init error; no GPU counters";
  const size_t first = r.err.find(notice);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(notice, first + 1), std::string::npos) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.number("SELECT count(*) FROM counters"), 0);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 11);

  CommandResult bad = run_partrain(
      fmt::format("trace -o {} --nvml-interval soon -- true", path("bad.db")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--nvml-interval soon: not a duration"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(path("bad.db")));
}

}  // namespace
}  // namespace partrain::testing
