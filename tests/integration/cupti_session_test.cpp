// The CUPTI session in a traced program's life, against a stand-in libcupti
// (tests/support/fake_cupti): CUDA initialised through the injection entry point starts it, the
// kernels still in CUPTI's hands at exit reach the trace, and the end at exit leaves CUPTI alone
// when the program's CUDA is already gone (a PyTorch program's libraries tear it down before
// partrain's atexit handler runs; the real libcupti then crashes in cuptiActivityDisable).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

class CuptiSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef FAKE_CUPTI_PROGRAM
    GTEST_SKIP() << "no CUPTI headers in this build (a CPU-only build): nothing to run";
#endif
  }
  std::string path(const std::string& name) const { return (scratch_.path() / name).string(); }
#ifdef FAKE_CUPTI_PROGRAM
  // The stand-in CUDA program traced into `trace` as rank 0 of 1, the stand-in libcupti's
  // settings (FAKE_CUPTI_*) in `env`.
  CommandResult trace_cuda_program(const std::string& trace, const std::string& env) {
    return run_partrain(
        fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 {}", trace, FAKE_CUPTI_PROGRAM),
        env + " env -u RANK");
  }
#endif
  ScratchDir scratch_;
};

#ifdef FAKE_CUPTI_PROGRAM
TEST_F(CuptiSessionTest, AtExitAfterCudaIsGoneKernelsAreKeptAndCuptiIsLeftAlone) {
  const std::string trace = path("exit.db");
  const std::string log = path("cupti.log");
  CommandResult r = trace_cuda_program(trace, fmt::format("FAKE_CUPTI_LOG={}", log));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "InitializeInjection ok\ndone\n");
  EXPECT_EQ(r.err.find("fake libcupti:"), std::string::npos) << r.err;

  // Both kernels are in the trace: the last one only the flush at exit could hand over.
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT name, rank, stream, block_x FROM kernels ORDER BY name"),
            "forward_kernel|0|7|128\nlast_kernel|0|7|128\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels k, runs r WHERE k.ts_ns < r.start_ns OR "
                     "k.ts_ns + k.dur_ns > r.end_ns"),
            0)
      << "kernels lie within the run";

  // After the teardown the session flushed, and called nothing that reaches the driver.
  const std::string calls = read_file(log);
  const size_t torn_down = calls.find("torn down\n");
  ASSERT_NE(torn_down, std::string::npos) << calls;
  const std::string after = calls.substr(torn_down);
  EXPECT_NE(after.find("cuptiActivityFlushAll\n"), std::string::npos) << calls;
  EXPECT_EQ(after.find("cuptiActivityDisable\n"), std::string::npos) << calls;
  EXPECT_EQ(after.find("cuptiUnsubscribe\n"), std::string::npos) << calls;
  // It had started for real: subscribed, CUPTI's clock read against the monotonic one (no
  // timestamp callback: it cost the launching thread), its kinds enabled. The kernels above lie
  // within the run only because their Unix-time stamps were converted.
  EXPECT_NE(calls.find("cuptiSubscribe_v2 partrain\ncuptiGetTimestamp\ncuptiGetTimestamp\n"
                       "cuptiGetTimestamp\n"
                       "cuptiActivityRegisterCallbacks\ncuptiActivityEnable\n"),
            std::string::npos)
      << calls;
  EXPECT_EQ(calls.find("cuptiActivityRegisterTimestampCallback"), std::string::npos) << calls;
}

// A CUPTI whose cuptiSubscribe_v2 refuses partrain's parameters: the session subscribes the first
// way, and the kernels are recorded as before.
TEST_F(CuptiSessionTest, ACuptiRefusingSubscribeV2IsSubscribedTheFirstWay) {
  const std::string trace = path("v1.db");
  const std::string log = path("v1-cupti.log");
  CommandResult r =
      trace_cuda_program(trace, fmt::format("FAKE_CUPTI_V2_REFUSES=1 FAKE_CUPTI_LOG={}", log));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("CUPTI cannot start"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(log).rfind("cuptiSubscribe_v2 partrain\ncuptiSubscribe\n", 0), 0u)
      << read_file(log);
  TraceQuery q(trace);
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 2);
}

// A buffer of 6,000 kernels with names of 511 bytes (3 MB of events, three times what the
// recorder buffers for one thread) handed over in one flush: every kernel reaches the trace,
// none is counted lost (on an H200, a PyTorch program's 6,000 lost 60% before the CUPTI thread
// waited for room).
TEST_F(CuptiSessionTest, ABufferOfThousandsOfKernelsReachesTheTraceWhole) {
  const std::string trace = path("burst.db");
  CommandResult r = trace_cuda_program(trace, "FAKE_CUPTI_BURST=6000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 6002);
  EXPECT_EQ(q.number("SELECT count(*) FROM kernels WHERE length(name) = 511"), 6000);
  EXPECT_EQ(q.number("SELECT count(*) FROM stats WHERE severity = 'data_loss'"), 0)
      << q.rows("SELECT name, value FROM stats");
}

// Another profiler holds CUPTI (nsys, torch.profiler): one notice, and the NCCL calls are traced
// all the same (the NCCL program, its CUDA initialised, finding the stand-in libcupti on the
// loader's path as it would the toolkit's).
// cuptiSubscribe_v2 names the holder where CUPTI gives its name; without one the notice says
// what usually holds it.
TEST_F(CuptiSessionTest, WhenAnotherProfilerHoldsCuptiNcclCallsAreStillTraced) {
  for (const auto& [taken, notice] :
       {std::pair<std::string, std::string>{
            "nsys-2025.3",
            "CUPTI is already in use in this process by \"nsys-2025.3\": GPU "
            "kernels are not recorded; NCCL calls still are"},
        {"1",
         "CUPTI is already in use by another profiler in this process (nsys, the PyTorch "
         "profiler, ...): GPU kernels are not recorded; NCCL calls still are"}}) {
    SCOPED_TRACE(taken);
    const std::string trace = path("taken-" + taken + ".db");
    const std::string log = path("cupti-" + taken + ".log");
    CommandResult r = run_partrain(
        fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 {} 0 1", trace, FAKE_NCCL_PROGRAM),
        fmt::format("LD_LIBRARY_PATH={} FAKE_CUPTI_TAKEN={} FAKE_CUDA_INIT=1 FAKE_CUPTI_LOG={} "
                    "env -u RANK",
                    FAKE_CUPTI_DIR, taken, log));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("InitializeInjection ok\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("done rank 0: all results as expected"), std::string::npos) << r.out;
    const size_t first = r.err.find(notice);
    EXPECT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(notice, first + 1), std::string::npos) << r.err;
    // It asked under its own name, was refused, and touched CUPTI no further.
    EXPECT_EQ(read_file(log), "cuptiSubscribe_v2 partrain\n");
    TraceQuery q(trace);
    EXPECT_EQ(q.number("SELECT count(*) FROM collectives"), 11);
    EXPECT_EQ(q.number("SELECT count(*) FROM kernels"), 0);
  }
}
#endif

}  // namespace
}  // namespace partrain::testing
