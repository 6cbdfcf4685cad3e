// NVTX under `partrain trace`: a program's NVTX ranges (the real nvtx3 loader, reaching
// libpartrain_inject.so through NVTX_INJECTION64_PATH) become slices, and those matching the step
// marker become the rank's steps, with what happens inside them tagged with the step.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

class NvtxStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef NVTX_PROGRAM
    GTEST_SKIP() << "no nvtx3 headers in this build (a CPU-only build): nothing to run";
#endif
  }
  std::string path(const std::string& name) const { return (scratch_.path() / name).string(); }
  ScratchDir scratch_;
};

#ifdef NVTX_PROGRAM
TEST_F(NvtxStepsTest, ProfilerStepRangesBecomeStepsAndRangesBecomeSlices) {
  const std::string trace = path("nvtx.db");
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- env RANK=0 {} 3 3", trace, NVTX_PROGRAM), "env -u RANK");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ran 3 steps\n");
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT step, dur_ns > 0, loss IS NULL FROM steps ORDER BY step"),
            "3|1|1\n4|1|1\n5|1|1\n");
  // Ranges inside a step carry it; registered strings and start/end ranges are named.
  EXPECT_EQ(q.rows("SELECT name, category, step FROM slices WHERE track_kind = 'cpu_thread' "
                   "AND name != 'process' ORDER BY ts_ns, dur_ns DESC"),
            "training|phase|NULL\n"
            "step|step|3\nforward|phase|3\nmylib.allreduce|phase|3\n"
            "step|step|4\nforward|phase|4\nmylib.allreduce|phase|4\n"
            "step|step|5\nforward|phase|5\nmylib.allreduce|phase|5\n");
  // Each step slice spans its forward and allreduce ranges.
  EXPECT_EQ(q.number("SELECT count(*) FROM slices s JOIN slices f ON f.step = s.step AND "
                     "f.name = 'forward' WHERE s.name = 'step' AND f.ts_ns >= s.ts_ns AND "
                     "f.ts_ns + f.dur_ns <= s.ts_ns + s.dur_ns"),
            3);
}

TEST_F(NvtxStepsTest, StepMarkerFlagChoosesTheRangesAndABadOneIsRefused) {
  const std::string trace = path("marker.db");
  CommandResult r = run_partrain(fmt::format("trace --step-marker '^forward$' -o {} -- env RANK=0 "
                                             "{} 0 4",
                                             trace, NVTX_PROGRAM),
                                 "env -u RANK");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(trace);
  // No number in the marker: steps are counted from 0.
  EXPECT_EQ(q.rows("SELECT step FROM steps ORDER BY step"), "0\n1\n2\n3\n");
  EXPECT_EQ(q.number("SELECT count(*) FROM slices WHERE name LIKE 'ProfilerStep#%'"), 4);

  CommandResult bad = run_partrain(
      fmt::format("trace --step-marker 'Step#(' -o {} -- true", path("bad.db")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--step-marker 'Step#(' is not a regular expression"), std::string::npos)
      << bad.err;
}
#endif

}  // namespace
}  // namespace partrain::testing
