// partrain's NCCL profiler plugin under `partrain trace --gpu-trace`: the tests' fake libnccl
// (tests/support/fake_nccl/fake_nccl_profiler.h) loads NCCL_PROFILER_PLUGIN as NCCL 2.27-2.29
// do (the newest table it knows, init per communicator with its hash, size and rank, each task's
// start and stop with its proxy operations, then its kernel channels with GPU timers), and the
// trace has one row per collective with its GPU span, algorithm, protocol and channels joined
// to the interposed call. An NCCL without plugin v4+ leaves host times and one notice; a plugin
// whose init fails is refused and the program goes on.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

class NcclProfilerPluginTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (scratch_.path() / name).string(); }

  // Both ranks of the fake's program under `partrain trace --gpu-trace nccl`, the fake offering
  // the plugin versions `offered` ("5,4"); ncclReduce fails on both (no task, no row).
  CommandResult trace_two_ranks(const std::string& trace, const std::string& offered,
                                const std::string& env = "") {
    std::string ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks += fmt::format("FAKE_NCCL_PROFILER_LOG={} RANK={} WORLD_SIZE=2 {} {} 2 >{} & ",
                           path(fmt::format("plugin{}.log", rank)), rank, FAKE_NCCL_PROGRAM, rank,
                           path(fmt::format("out{}", rank)));
    }
    return run_partrain(
        fmt::format("trace --gpu-trace nccl -o {} -- sh -c '{}wait'", trace, ranks),
        fmt::format("FAKE_NCCL_PROFILER={} FAKE_NCCL_FAIL=ncclReduce FAKE_NCCL_ID=job7 {} env -u "
                    "RANK -u WORLD_SIZE -u NCCL_PROFILER_PLUGIN -u NVTX_INJECTION64_PATH",
                    offered, env));
  }

  void expect_programs_unchanged() const {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string out = read_file(path(fmt::format("out{}", rank)));
      EXPECT_NE(out.find(fmt::format("done rank {}: all results as expected", rank)),
                std::string::npos)
          << out;
    }
  }

#ifdef FAKE_CUPTI_DIR
  // The fake program as rank 0 of `nranks` at `level`, NCCL offering the plugin versions
  // `offered` ("none": no plugin), with `env` added; returns the stand-in libcupti's log of the
  // entry points called.
  std::string trace_fake_cupti(const std::string& name, const std::string& level, int nranks,
                               const std::string& offered, const std::string& env = "") {
    const std::string log = path(name + "-cupti.log");
    CommandResult r = run_partrain(
        fmt::format("trace --gpu-trace {} -o {} -- sh -c 'RANK=0 WORLD_SIZE=1 {} 0 {} >{}'", level,
                    path(name + ".db"), FAKE_NCCL_PROGRAM, nranks, path(name + ".out")),
        fmt::format(
            "LD_LIBRARY_PATH={} FAKE_CUDA_INIT=1 FAKE_CUPTI_LOG={} FAKE_NCCL_PROFILER={} {} "
            "env -u RANK -u NCCL_PROFILER_PLUGIN",
            FAKE_CUPTI_DIR, log, offered, env));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::filesystem::exists(log) ? read_file(log) : "";
  }
#endif

  ScratchDir scratch_;
};

// NCCL 2.29 offers v6, 2.28 v5, 2.27 v4: the newest the library exports is taken (it exports
// all three), and every version's descriptors give the same rows.
class NcclProfilerPluginVersionTest : public NcclProfilerPluginTest,
                                      public ::testing::WithParamInterface<const char*> {};

TEST_P(NcclProfilerPluginVersionTest, EachCollectiveIsOneRowWithNcclsGpuSpanAndChoices) {
  const std::string offered = GetParam();
  const std::string trace = path("plugin.db");
  CommandResult r = trace_two_ranks(trace, offered, "FAKE_NCCL_ALGO=Tree");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_programs_unchanged();
  EXPECT_EQ(r.err.find("did not load partrain's profiler plugin"), std::string::npos) << r.err;
  const std::string newest = fmt::format("plugin loaded as ncclProfiler_v{}\n", offered.front());
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = read_file(path(fmt::format("plugin{}.log", rank)));
    EXPECT_EQ(log.rfind(newest, 0), 0u) << log;
    EXPECT_EQ(occurrences(log, "task "), 10u) << log;  // the failed ncclReduce made none
  }

  TraceQuery q(trace);
  // One row per call, as without the plugin, each with what NCCL reported of it: the kernel
  // channels' span (2 channels of 40 us, the second 1 us later; p2p: 1 channel), algorithm,
  // protocol and channels. (In call order: a row is written once its report came, the last
  // broadcast's when its communicator ended.)
  EXPECT_EQ(q.rows("SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank"),
            "0|10\n1|10\n");
  EXPECT_EQ(q.rows("SELECT comm_id LIKE '%split%', seq, op, count, algorithm, protocol, channels, "
                   "gpu_end_ns - gpu_start_ns FROM collectives WHERE rank = 0 ORDER BY enqueue_ns, "
                   "slice_id"),
            "0|0|all_reduce|1024|Tree|Simple|2|41000\n"
            "0|1|all_reduce|4096|Tree|Simple|2|41000\n"
            "0|0|send|256|NULL|NULL|1|40000\n"
            "0|0|recv|256|NULL|NULL|1|40000\n"
            "0|2|all_gather|100|Tree|Simple|2|41000\n"
            "0|3|reduce_scatter|50|Tree|Simple|2|41000\n"
            "0|4|broadcast|10|Tree|Simple|2|41000\n"
            "0|5|broadcast|12|Tree|Simple|2|41000\n"
            "1|0|all_reduce|8|Tree|Simple|2|41000\n"
            "1|1|broadcast|16|Tree|Simple|2|41000\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE algorithm IS NOT NULL OR op IN "
                     "('send', 'recv')"),
            20);
  // The GPU ran each one after its call was made (the timers are Unix time, placed on the
  // host's clock) and within a second of its return.
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE gpu_start_ns >= enqueue_ns - 1000000 "
                     "AND gpu_start_ns <= ts_ns + dur_ns + 1000000000"),
            20);
  // The level records no CUPTI kernels; the join and the proxies are summed per rank.
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 0);
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'nccl_plugin_joined' ORDER BY "
                   "rank"),
            "0|10\n1|10\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM stats WHERE name IN ('nccl_plugin_host_only', "
                     "'nccl_plugin_unmatched', 'nccl_plugin_gpu_clock_unaligned')"),
            0);
  // 8 collectives of 2 proxy operations and 2 transfers of 1, 4 steps of 64 KiB each.
  EXPECT_EQ(q.rows("SELECT name, value FROM stats WHERE rank = 0 AND name LIKE 'nccl_proxy_%' "
                   "ORDER BY name"),
            fmt::format("nccl_proxy_ops|18\nnccl_proxy_recv_bytes|{}\nnccl_proxy_send_bytes|{}\n",
                        1 * 4 * 65536, 17 * 4 * 65536));
}

INSTANTIATE_TEST_SUITE_P(OfferedVersions, NcclProfilerPluginVersionTest,
                         ::testing::Values("6,5,4", "5,4", "4"));

// An NCCL before 2.27 has no plugin interface with GPU timers: the calls keep the
// interposition's host times, and each rank says so once.
TEST_F(NcclProfilerPluginTest, AnNcclWithoutPluginV4KeepsHostTimesAndSaysSoOnce) {
  const std::string trace = path("old.db");
  CommandResult r = trace_two_ranks(trace, "none", "FAKE_NCCL_VERSION=22501");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_programs_unchanged();
  const std::string notice =
      "NCCL 2.25.1 did not load partrain's profiler plugin (NCCL_PROFILER_PLUGIN; interface v4 "
      "or later, NCCL 2.27 on): collectives keep the interposition's host times";
  EXPECT_EQ(occurrences(r.err, notice), 2u) << r.err;  // one per rank, not one per communicator
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank"),
            "0|10\n1|10\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE gpu_start_ns IS NOT NULL OR "
                     "algorithm IS NOT NULL OR channels IS NOT NULL"),
            0);
  EXPECT_EQ(q.rows("SELECT rank, value FROM stats WHERE name = 'nccl_plugin_absent' ORDER BY "
                   "rank"),
            "0|1\n1|1\n");
}

// The user's own profiler plugin holds NCCL's one slot: partrain leaves it there and says what
// --gpu-trace nccl falls back to.
TEST_F(NcclProfilerPluginTest, AUsersPluginKeepsTheSlotAndTheFallbackIsSaid) {
  const std::string theirs = path("libnccl-profiler-theirs.so");
  CommandResult with_theirs = run_partrain(
      fmt::format("trace --gpu-trace nccl -o {} -- sh -c 'FAKE_NCCL_PROFILER_LOG={} RANK=0 "
                  "WORLD_SIZE=1 {} 0 1 >{}'",
                  path("theirs.db"), path("theirs.log"), FAKE_NCCL_PROGRAM, path("out_theirs")),
      fmt::format("FAKE_NCCL_PROFILER=5,4 NCCL_PROFILER_PLUGIN={} env -u RANK", theirs));
  ASSERT_EQ(with_theirs.exit_code, 0) << with_theirs.err;
  EXPECT_NE(with_theirs.err.find(fmt::format(
                "NCCL_PROFILER_PLUGIN is set ({}): NCCL has one profiler-plugin slot, so "
                "partrain's is not loaded and collectives keep the interposition's host times "
                "(no GPU time at --gpu-trace nccl)",
                theirs)),
            std::string::npos)
      << with_theirs.err;
  // NCCL tried the user's (absent here) and went on without a plugin.
  EXPECT_NE(read_file(path("theirs.log")).find(fmt::format("plugin {} cannot be opened", theirs)),
            std::string::npos);
  EXPECT_NE(read_file(path("out_theirs")).find("done rank 0: all results as expected"),
            std::string::npos);
  TraceQuery q(path("theirs.db"));
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE gpu_start_ns IS NOT NULL"), 0);
  EXPECT_GT(q.number("SELECT count(*) FROM collectives"), 0);
}

// Outside a traced process (NCCL_PROFILER_PLUGIN naming partrain's library by hand, nothing
// collecting) the plugin's init fails: NCCL closes it and carries on, every call succeeding.
TEST_F(NcclProfilerPluginTest, APluginWhoseInitFailsIsRefusedAndNcclCarriesOn) {
  CommandResult r = run_shell(fmt::format(
      "env -u PARTRAIN_COLLECTOR -u RANK FAKE_NCCL_PROFILER=6,5,4 NCCL_PROFILER_PLUGIN={} "
      "FAKE_NCCL_PROFILER_LOG={} {} 0 2",
      PARTRAIN_INJECT_LIBRARY, path("refused.log"), FAKE_NCCL_PROGRAM));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("done rank 0: all results as expected"), std::string::npos) << r.out;
  const std::string log = read_file(path("refused.log"));
  EXPECT_EQ(log.rfind("plugin loaded as ncclProfiler_v6\n"
                      "plugin init failed with error 5: continuing without it\n",
                      0),
            0u)
      << log;
  EXPECT_EQ(occurrences(log, "task "), 0u) << log;
}

// A PyTorch rank (played by tests/integration/scripts/torch_nccl_join.py on a 2-rank NCCL group):
// PyTorch's rows, named and numbered by PyTorch, take the plugin's report of their NCCL calls;
// a barrier (NCCL's all_reduce of one element) too. The all_gather whose PyTorch record never
// came, on a communicator never destroyed, is reported at exit without its channels: its row
// has NCCL's choices and host times.
TEST_F(NcclProfilerPluginTest, PyTorchsRowsTakeThePluginsReportOfTheirCalls) {
  const std::string trace = path("torch.db");
  const std::string source = PARTRAIN_SOURCE_DIR;
  CommandResult r = run_partrain(
      fmt::format("trace --gpu-trace nccl -o {} -- python3 {}/tests/integration/scripts/"
                  "torch_nccl_join.py {} {}/share/python 2",
                  trace, source, FAKE_NCCL_LIBRARY, source),
      "FAKE_NCCL_PROFILER=5,4 RANK=0 WORLD_SIZE=1 PYTHONNOUSERSITE=1 env -u "
      "NCCL_PROFILER_PLUGIN");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT CASE WHEN comm_id LIKE 'nccl-%' THEN 'nccl' ELSE comm_id END, seq, op, "
                   "algorithm, channels, gpu_end_ns - gpu_start_ns FROM collectives ORDER BY "
                   "ts_ns"),
            "default_pg:0|0|all_reduce|Ring|2|41000\n"
            "default_pg:0|1|barrier|Ring|2|41000\n"
            "nccl|2|broadcast|Ring|2|41000\n"
            "nccl|3|all_gather|Ring|2|NULL\n");
}

// `partrain launch` gives a command's workers the same level and plugin as `partrain trace`.
TEST_F(NcclProfilerPluginTest, LaunchGivesItsWorkersThePlugin) {
  const std::string trace = path("launch.db");
  CommandResult r = run_partrain(
      fmt::format("launch -n 2 --gpu-trace nccl --trace {} -- sh -c 'exec {} $RANK $WORLD_SIZE'",
                  trace, FAKE_NCCL_PROGRAM),
      "FAKE_NCCL_PROFILER=5,4 FAKE_NCCL_ID=launch1 env -u NCCL_PROFILER_PLUGIN");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(occurrences(r.out, "all results as expected"), 2u) << r.out;
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, count(*), count(gpu_start_ns), count(channels) FROM collectives "
                   "GROUP BY rank ORDER BY rank"),
            "0|11|11|11\n1|11|11|11\n");  // ncclReduce succeeds here
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 0);
}

// The levels' CUPTI part, against the stand-in libcupti (CUDA initialised through the injection
// entry point, as a GPU program's is): nccl leaves CUPTI alone, kernels enables kernels and the
// external correlation only, full the six kinds it always had. The plugin reports at each.
#ifdef FAKE_CUPTI_DIR
TEST_F(NcclProfilerPluginTest, EachLevelAsksCuptiForItsKindsOnly) {
  for (const auto& [level, enables] :
       {std::pair<std::string, size_t>{"nccl", 0}, {"kernels", 2}, {"full", 6}}) {
    SCOPED_TRACE(level);
    const std::string calls = trace_fake_cupti(level, level, 2, "5,4");
    EXPECT_EQ(occurrences(calls, "cuptiActivityEnable\n"), enables) << calls;
    EXPECT_EQ(occurrences(calls, "cuptiSubscribe_v2 partrain\n"), enables > 0 ? 1u : 0u) << calls;
    // The plugin gives each call's GPU span: no launch callback links kernels to calls.
    EXPECT_EQ(occurrences(calls, "cuptiEnableCallback"), 0u) << calls;
    TraceQuery q(path(level + ".db"));
    EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE channels IS NOT NULL"), 11);
  }
}

// An NCCL without plugin v4+ gives no GPU span: at kernels, CUPTI's launch callbacks link
// NCCL's kernels to their calls as before the plugin. They are on only while the program is
// inside a call (each of kLaunchCallbacks' 12 switched on as it enters and off as it leaves),
// since on they cost every kernel launch of the process.
TEST_F(NcclProfilerPluginTest, WithoutThePluginKernelsAreLinkedThroughLaunchCallbacks) {
  const std::string calls = trace_fake_cupti("no-plugin", "kernels", 2, "none");
  const size_t on = occurrences(calls, "cuptiEnableCallback on\n");
  // Once for each of the 7 calls outside a group and each of the 3 ncclGroupEnds (the ring
  // exchange's, and the nested pair's two); calls inside a group launch nothing themselves.
  EXPECT_EQ(on, 12u * 10) << calls;
  EXPECT_EQ(occurrences(calls, "cuptiEnableCallback off\n"), on) << calls;
  // Never on outside a call: the last switch of all is off, before the session ends.
  EXPECT_LT(calls.rfind("cuptiEnableCallback on"), calls.rfind("cuptiEnableCallback off"));
  TraceQuery q(path("no-plugin.db"));
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 11);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE channels IS NOT NULL"), 0);

  // PARTRAIN_CUPTI_OFF=callback-scoping, to measure the scoping: on once, from the first call.
  const std::string unscoped =
      trace_fake_cupti("unscoped", "kernels", 2, "none", "PARTRAIN_CUPTI_OFF=callback-scoping");
  EXPECT_EQ(occurrences(unscoped, "cuptiEnableCallback on\n"), 12u) << unscoped;
  EXPECT_EQ(occurrences(unscoped, "cuptiEnableCallback off\n"), 0u) << unscoped;
}

// NCCL reports no task of a one-rank communicator to the plugin, though it may run a kernel
// there (an AVG all_reduce scales in place): beside the plugin, such a communicator's calls are
// linked through CUPTI as without it, and their rows wait for their kernels. The stand-in
// libcupti runs none for them, so each leaves without GPU times, said in the stat.
TEST_F(NcclProfilerPluginTest, AOneRankCommunicatorsCallsAreLinkedThroughCuptiBesideThePlugin) {
  const std::string calls = trace_fake_cupti("one-rank", "kernels", 1, "5,4");
  const size_t on = occurrences(calls, "cuptiEnableCallback on\n");
  EXPECT_EQ(on, 12u * 10) << calls;
  EXPECT_EQ(occurrences(calls, "cuptiEnableCallback off\n"), on) << calls;
  TraceQuery q(path("one-rank.db"));
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 11);
  EXPECT_EQ(q.number("SELECT count(*) FROM collectives WHERE channels IS NOT NULL"), 0);
  EXPECT_EQ(q.number("SELECT sum(value) FROM stats WHERE name = 'nccl_calls_without_gpu_time'"),
            11);

  // The same program as one rank of two: the plugin spans every call, nothing is linked.
  const std::string two = trace_fake_cupti("two-ranks", "kernels", 2, "5,4");
  EXPECT_EQ(occurrences(two, "cuptiEnableCallback"), 0u) << two;
  TraceQuery q2(path("two-ranks.db"));
  EXPECT_EQ(q2.number("SELECT count(*) FROM collectives WHERE channels IS NOT NULL"), 11);
  EXPECT_EQ(q2.number("SELECT count(*) FROM stats WHERE name = 'nccl_calls_without_gpu_time'"), 0);
}
#endif

TEST_F(NcclProfilerPluginTest, AnUnknownLevelIsAUsageError) {
  CommandResult r =
      run_partrain(fmt::format("trace --gpu-trace everything -o {} -- true", path("bad.db")));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--gpu-trace everything: no such level; give nccl, kernels or full"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("bad.db")));
}

TEST_F(NcclProfilerPluginTest, LaunchRefusesALevelWithoutATrace) {
  CommandResult r = run_partrain("launch -n 1 --no-trace --gpu-trace nccl -- true");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--gpu-trace says how much of the GPU the trace records: drop it or "
                       "--no-trace"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace partrain::testing
