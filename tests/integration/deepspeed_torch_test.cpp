// A DeepSpeed job's steps and failures: gloo jobs of tests/integration/scripts/torch_deepspeed.py
// under `partrain launch`, with real torch and the DeepSpeed stand-in beside the script
// (scripts/deepspeed_standin: DeepSpeed 0.19.8's class structure, so CI needs no DeepSpeed).
// DeepSpeed's optimizers are no torch Optimizer and its engine is none: its engine.step() (the
// pipeline engine's train_batch()) is the step, and a step() its fp16 wrapper calls while it is
// made is none; an exception rising in DeepSpeed installed outside site-packages quotes the
// program's own line. Labelled `torch`; SKIPPED with one line without a torch interpreter
// (tests/support/torch_python.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

const std::string kDeepSpeed = (kScenarioScripts / "torch_deepspeed.py").string();

// `partrain launch -n 2 --trace TRACE -- python torch_deepspeed.py CASE`, bounded.
CommandResult launch_case(const std::string& trace, const std::string& scenario) {
  return run_shell(fmt::format("timeout -k 10 300 {} launch -n 2 --trace {} -- {} {} {}",
                               partrain_binary(), shell_quoted(trace), shell_quoted(torch_python()),
                               shell_quoted(kDeepSpeed), scenario));
}

// Rank `rank`'s steps, in order, comma-separated.
std::string steps_of(TraceQuery& query, int rank) {
  return query.rows(fmt::format(
      "SELECT group_concat(step) FROM (SELECT step FROM steps WHERE rank = {} ORDER BY step)",
      rank));
}

// The step of each of rank `rank`'s `op` collectives, in the order issued.
std::string op_steps(TraceQuery& query, int rank, const std::string& op) {
  return query.rows(
      fmt::format("SELECT group_concat(step) FROM (SELECT step FROM collectives "
                  "WHERE rank = {} AND op = '{}' ORDER BY ts_ns)",
                  rank, op));
}

// ZeRO-2, 3 updates of 2 micro-batches: the ZeRO optimizer's all-gather of the updated
// partitions runs after its inner AdamW's step, inside engine.step(). It landed in the next step
// (1, 2 and 3, the last in a step that never ended): the inner AdamW ended each step.
TEST(DeepSpeed, ZeroAllGatherAfterTheUpdateIsInItsStep) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "zero.db").string();
  const CommandResult run = launch_case(trace, "zero");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(steps_of(query, rank), "0,1,2\n") << "rank " << rank;
    EXPECT_EQ(op_steps(query, rank, "all_gather"), "0,1,2\n") << "rank " << rank;
    EXPECT_EQ(op_steps(query, rank, "all_reduce"), "0,0,0,0,1,1,1,1,2,2,2,2\n") << "rank " << rank;
  }
}

// fp16 without ZeRO: FP16_Optimizer steps its inner AdamW once with zero gradients while it is
// made. That was step 0, so 2 updates were 3 steps (0-2), the gradients' all-reduces in steps 1
// and 2, and the warm-up skip dropped the stand-in step instead of the first iteration.
TEST(DeepSpeed, AStepWhileTheFp16WrapperIsMadeIsNoStep) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "fp16.db").string();
  const CommandResult run = launch_case(trace, "fp16");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(steps_of(query, rank), "0,1\n") << "rank " << rank;
    EXPECT_EQ(op_steps(query, rank, "all_reduce"), "0,0,1,1\n") << "rank " << rank;
  }
}

// The pipeline engine's train_batch() broadcasts the loss after the model step: it was in the
// next step (1, 2, 3, the last never ending).
TEST(DeepSpeed, ThePipelineLossBroadcastIsInItsBatchStep) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "pipeline.db").string();
  const CommandResult run = launch_case(trace, "pipeline");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(steps_of(query, rank), "0,1,2\n") << "rank " << rank;
    EXPECT_EQ(op_steps(query, rank, "broadcast"), "0,1,2\n") << "rank " << rank;
  }
}

// DeepSpeed on sys.path outside site-packages (here the stand-in beside the script; a `pip
// install --target` directory or a checkout on PYTHONPATH alike) rejects the batch sizes in
// deepspeed.initialize(). The exception's summary quoted DeepSpeed's frame as the program's own
// line and left the program's call out; it quotes both now.
TEST(DeepSpeed, AnExceptionInALibraryOutsideSitePackagesQuotesTheProgramsLine) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "bad_config.db").string();
  const CommandResult run = launch_case(trace, "bad_config");
  ASSERT_EQ(run.exit_code, 1) << run.err;
  const std::string summary = TraceQuery(trace).rows(
      "SELECT description FROM stats WHERE name = 'rank_uncaught_exception' AND rank = 0");
  EXPECT_NE(summary.find("torch_deepspeed.py\", line "), std::string::npos) << summary;
  EXPECT_LT(summary.find(", in engine_for | File \""), summary.find("in _batch_assertion | "))
      << summary;
  EXPECT_NE(summary.find("deepspeed_standin/deepspeed/runtime/config.py\", line "),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("| AssertionError: Check batch related parameters."), std::string::npos)
      << summary;
}

}  // namespace
}  // namespace partrain::testing
