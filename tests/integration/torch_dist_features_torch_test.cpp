// Users' torch.distributed features that run outside ProcessGroup's hooks, recorded all the
// same: gloo jobs of tests/integration/scripts/torch_dist_features.py under `partrain launch`.
// dist.monitored_barrier (gloo's monitoredBarrier sends and receives on its backend, past the
// hooks) is a barrier of its group: recorded, timed, watched by --collective-timeout, and failed
// when it times out. Labelled `torch`; SKIPPED with one line without a torch interpreter
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

CommandResult launch_case(const std::string& trace, int ranks, const std::string& options,
                          const std::string& scenario) {
  return launch_script_case(kScenarioScripts / "torch_dist_features.py", trace, ranks, options,
                            scenario);
}

// Two monitored_barriers between all_reduces on 3 ranks, rank 1 late to the first by 0.3 s: each
// is a barrier row on every rank at its place in the group's numbering (all_reduce seq 0, barrier
// 1, all_reduce 2, barrier 3, all_reduce 4), and rank 0's wait for rank 1 shows. They were not
// recorded at all: the all_reduces were seqs 0-2 and the wait was nowhere.
TEST(TorchDistFeatures, MonitoredBarrierIsABarrierOfItsGroup) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "mb.db").string();
  const CommandResult run = launch_case(trace, 3, "", "monitored_barrier");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  expect_collectives_matched(query);
  EXPECT_EQ(query.rows("SELECT seq, op, count(*) FROM collectives WHERE comm_id = 'default_pg:0' "
                       "GROUP BY seq, op ORDER BY seq"),
            "0|all_reduce|3\n1|barrier|3\n2|all_reduce|3\n3|barrier|3\n4|all_reduce|3\n");
  // Rank 0 entered the first barrier 0.3 s before rank 1 and left it after rank 1 came.
  EXPECT_GT(query.number("SELECT dur_ns FROM collectives WHERE rank = 0 AND seq = 1"), 200'000'000);
}

// Rank 1 hangs before a monitored_barrier (timeout 10 minutes) the others wait in: the
// watchdog fires after 3 s and the diagnosis names rank 1 and the barrier, as for dist.barrier.
// Nothing fired: the job waited out monitored_barrier's own timeout.
TEST(TorchDistFeatures, HangBeforeAMonitoredBarrierIsDiagnosed) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "mb_hang.db").string();
  const CommandResult run =
      launch_case(trace, 3, "--collective-timeout 3s", "monitored_barrier_hang");
  EXPECT_EQ(run.exit_code, 124) << run.err;
  EXPECT_NE(run.err.find("the collective watchdog fired"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("partrain: culprit: rank 1 (missing_ranks at default_pg:0 seq 1): hung "
                         "outside any collective"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("it never entered barrier"), std::string::npos) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT group_concat(rank) FROM (SELECT rank FROM collectives WHERE "
                       "op = 'barrier' AND seq = 1 AND state = 'started' ORDER BY rank)"),
            "0,2\n");
}

// Rank 0's monitored_barrier times out (2 s) while rank 1 sleeps: a failed barrier row on rank
// 0, which had left no row at all.
TEST(TorchDistFeatures, AMonitoredBarrierThatTimesOutLeavesAFailedRow) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "mb_timeout.db").string();
  const CommandResult run = launch_case(trace, 2, "", "monitored_barrier_timeout");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("rank 0: monitored_barrier failed"), std::string::npos) << run.out;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank, seq, state FROM collectives WHERE op = 'barrier'"),
            "0|1|failed\n");
  EXPECT_GT(query.number("SELECT dur_ns FROM collectives WHERE op = 'barrier'"), 1'500'000'000);
}

// Rank 0 isends tag 5 then tag 9, rank 1 irecvs tag 9 first (and the same with send/recv, and a
// batch_isend_irecv exchange with tag 7): a correct program. Each send pairs with the recv of its
// tag (seq T * 2^32 + n), so analyze finds no desync; numbered per peer only, rank 1's first recv
// (tag 9, 12 B) met rank 0's first send (tag 5, 28 B): "[critical] desync".
TEST(TorchDistFeatures, TaggedTransfersPostedInAnotherOrderAreNoDesync) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "tags.db").string();
  const CommandResult run = launch_case(trace, 2, "", "p2p_tags");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  expect_collectives_matched(query);
  EXPECT_EQ(query.rows("SELECT seq >> 32, seq & 4294967295, bytes FROM collectives WHERE "
                       "op = 'send' AND rank = 0 ORDER BY ts_ns"),
            "5|0|28\n9|0|12\n3|0|16\n4|0|8\n7|0|20\n");
  const CommandResult analyze = run_partrain("analyze " + shell_quoted(trace));
  EXPECT_EQ(analyze.exit_code, 0) << analyze.err;
  EXPECT_EQ(analyze.out.find("desync"), std::string::npos) << analyze.out;
}

// Rank 0 sends with tag 1, rank 1 receives with tag 2: both hang. The diagnosis says that the
// two differ only by tag; it said they were "posted on both sides but not completed".
TEST(TorchDistFeatures, ASendAndARecvThatDifferOnlyByTagAreSaidToInAHang) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "tag_hang.db").string();
  const CommandResult run = launch_case(trace, 2, "--collective-timeout 3s", "p2p_tag_hang");
  EXPECT_EQ(run.exit_code, 124) << run.err;
  EXPECT_NE(run.err.find("send 0->1 on default_pg:0 seq 0 (tag 1): missing ranks: rank 1 never "
                         "posted the matching recv"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rank 1 has a recv pending between the two with tag 2, this send has "
                         "tag 1: they differ only by tag"),
            std::string::npos)
      << run.err;
}

// PostLocalSGDOptimizer never calls Optimizer.__init__, so torch runs no step hooks for it: its
// inner SGD's step ended each step, and the wrapper's averaging all_reduce (steps 2, 4 and 6 of
// the loop) landed in steps 3, 5 and 7. The wrapper's step() now ends the step.
TEST(TorchDistFeatures, AWrapperOptimizerWithoutOptimizerInitEndsTheStep) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "post_local_sgd.db").string();
  const CommandResult run = launch_case(trace, 2, "", "post_local_sgd");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM (SELECT step FROM steps WHERE rank = 0 "
                       "ORDER BY step)"),
            "0,1,2,3,4,5,6,7\n");
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM (SELECT step FROM collectives WHERE "
                       "rank = 0 AND op = 'all_reduce' ORDER BY ts_ns)"),
            "2,4,6\n");
}

// A gloo group alive as the program exits runs its worker threads into the interpreter's
// shutdown, where one that frees a tensor aborts the process now and then (torch's race, as
// likely under torchrun): each rank's exit says so in the stat torch_gloo_groups_at_exit, which
// analyze reads for a rank that then aborted. A group destroyed and dropped says nothing: the
// programs import torch.distributed.nn and torch.distributed.optim before init_process_group, so
// a first optimizer (torch._dynamo imports torch.distributed.nn.functional) and
// PostLocalSGDOptimizer's module (ZeroRedundancyOptimizer) no longer keep the default group as a
// default argument; they did, and accumulating_wrapper aborted 1 run in 10 on "terminate called
// without an active exception".
TEST(TorchDistFeatures, AGlooGroupAliveAtExitIsSaid) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string at_exit =
      "SELECT rank || ': ' || description FROM stats WHERE name = 'torch_gloo_groups_at_exit' "
      "ORDER BY rank";
  const std::string held = (scratch.path() / "held.db").string();
  const CommandResult held_run = launch_case(held, 2, "", "world_held_in_a_global");
  ASSERT_EQ(held_run.exit_code, 0) << held_run.err;
  const std::string said = TraceQuery(held).rows(at_exit);
  for (const char* rank : {"0: ", "1: "}) {
    EXPECT_NE(said.find(std::string(rank) + "gloo group default_pg:0 outlived "
                                            "destroy_process_group(): something still held it"),
              std::string::npos)
        << said;
  }
  EXPECT_NE(said.find("its worker threads run into the interpreter's shutdown"), std::string::npos)
      << said;

  const std::string never = (scratch.path() / "never.db").string();
  const CommandResult never_run = launch_case(never, 2, "", "world_never_destroyed");
  ASSERT_EQ(never_run.exit_code, 0) << never_run.err;
  EXPECT_NE(TraceQuery(never).rows(at_exit).find(
                "1: gloo group default_pg:0 never destroyed (no destroy_process_group())"),
            std::string::npos)
      << TraceQuery(never).rows(at_exit);

  for (const char* program : {"accumulating_wrapper", "post_local_sgd"}) {
    const std::string dropped = (scratch.path() / (std::string(program) + ".db")).string();
    const CommandResult dropped_run = launch_case(dropped, 2, "", program);
    ASSERT_EQ(dropped_run.exit_code, 0) << dropped_run.err;
    EXPECT_EQ(TraceQuery(dropped).rows(at_exit), "") << program;
  }
}

// accelerate's gradient accumulation: its AcceleratedOptimizer (no Optimizer.__init__) steps the
// inner SGD only on the 4th micro-batch, after the gradients' all_reduces. 8 micro-batches are 2
// steps, each holding its all_reduces; every micro-batch was a step (0-7), all_reduces in 3 and 7.
TEST(TorchDistFeatures, AWrapperThatStepsNoOptimizerTakesNoStep) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "accumulating.db").string();
  const CommandResult run = launch_case(trace, 2, "", "accumulating_wrapper");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(query.rows(fmt::format("SELECT group_concat(step) FROM (SELECT step FROM steps "
                                     "WHERE rank = {} ORDER BY step)",
                                     rank)),
              "0,1\n");
    EXPECT_EQ(query.rows(fmt::format("SELECT step, count(*) FROM collectives WHERE rank = {} AND "
                                     "op = 'all_reduce' GROUP BY step ORDER BY step",
                                     rank)),
              "0|2\n1|2\n");
  }
}

// A GradScaler that skips every optimizer step (the loss is inf): no step ends, and analyze said
// only "whole run (no steps recorded)". The collectives carry step 0, begun when the optimizer
// was made: analyze warns that a step began but none ended.
TEST(TorchDistFeatures, AGradScalerThatSkipsEveryStepIsSaid) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "scaler.db").string();
  const CommandResult run = launch_case(trace, 2, "", "scaler_skips_every_step");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(TraceQuery(trace).number("SELECT count(*) FROM steps"), 0);
  const CommandResult analyze =
      run_shell(fmt::format("{} analyze {}", partrain_binary(), shell_quoted(trace)));
  ASSERT_EQ(analyze.exit_code, 0) << analyze.err;
  EXPECT_NE(analyze.out.find("no_step_ended: rank 0 issued 4 collectives in step 0; rank 1 "
                             "issued 4 collectives in step 0, which never ended"),
            std::string::npos)
      << analyze.out;
}

}  // namespace
}  // namespace partrain::testing
