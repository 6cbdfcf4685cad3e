// One row per collective when PyTorch's hooks and the NCCL interposition both see it, through
// the real libpartrain_inject.so: a process plays a PyTorch rank on an NCCL group
// (tests/integration/scripts/torch_nccl_join.py: partrain's module's calls around NCCL calls to
// the stand-in libnccl), as torch cannot without a GPU. What a GPU adds (the joined row's GPU
// times from CUPTI, through the NCCL call's correlation) is the GPU validation's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(PytorchNcclJoin, EachOpIsOneRowNamedAndNumberedByPyTorch) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "join.db";
  const fs::path script =
      fs::path(PARTRAIN_SOURCE_DIR) / "tests/integration/scripts/torch_nccl_join.py";
  const fs::path share_python = fs::path(PARTRAIN_SOURCE_DIR) / "share/python";
  CommandResult run = run_partrain("trace -o '" + trace.string() + "' -- python3 '" +
                                   script.string() + "' '" + FAKE_NCCL_LIBRARY + "' '" +
                                   share_python.string() + "'",
                                   "RANK=0 WORLD_SIZE=1 PYTHONNOUSERSITE=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;

  TraceQuery query(trace);
  // The all_reduce and the barrier under PyTorch's name and numbers (NCCL numbered them 0 and
  // 1 on its communicator, as all_reduces); the broadcast outside any window and the all_gather
  // whose record never came (written at exit) as NCCL's own.
  EXPECT_EQ(query.rows("SELECT CASE WHEN comm_id LIKE 'nccl-%' THEN 'nccl' ELSE comm_id END, "
                       "seq, op, count, bytes, state FROM collectives ORDER BY ts_ns"),
            "default_pg:0|0|all_reduce|1000|4000|completed\n"
            "default_pg:0|1|barrier|0|0|completed\n"
            "nccl|2|broadcast|16|64|completed\n"
            "nccl|3|all_gather|8|32|completed\n");
}

}  // namespace
}  // namespace partrain::testing
