// Unmodified torch.distributed programs under `partrain launch`, against torch's own client
// (the torch-venv's torch 2.15, CPU): every TCPStore operation on partrain's store,
// init_process_group("gloo") from the environment with all_reduces on 4 ranks, and a script
// whose @record-decorated entry point raises on rank 2. Labelled `torch`; SKIPPED with one line
// without a torch interpreter (PARTRAIN_TORCH_PYTHON, tests/support/torch_python.h).
#include <fmt/format.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "tests/integration/command_runner.h"
#include "tests/support/torch_python.h"

namespace partrain {
namespace {

using testing::CommandResult;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::string script(const std::string& name) {
  return std::string(PARTRAIN_SOURCE_DIR) + "/tests/integration/scripts/" + name;
}

class LaunchTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARTRAIN_REQUIRE_TORCH();
    python_ = testing::torch_python();
  }
  CommandResult launch(const std::string& flags, const std::string& script_name) {
    return testing::run_partrain(fmt::format("launch {} --no-trace -- {} {}", flags, python_,
                                             script(script_name)));
  }
  std::string python_;
};

TEST_F(LaunchTorchTest, TorchsTcpStoreClientDoesEveryOperationOnPartrainsStore) {
  const CommandResult r = launch("-n 1", "torch_store_ops.py");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* op : {"set/get", "add", "check", "blocking get released by a set",
                         "wait timeout", "compare_set match", "multi_set/multi_get", "append",
                         "delete_key", "list_keys", "num_keys", "queue_pop",
                         "blocking queue_pop released by a push", "barrier", "a 4 MiB value",
                         "is_master=True on MASTER_PORT shares the agent store"}) {
    EXPECT_TRUE(contains(r.out, fmt::format("[rank 0] ok {}\n", op))) << op << "\n" << r.out;
  }
  EXPECT_TRUE(contains(r.out, "all TCPStore operations ok")) << r.out << r.err;
}

// init_process_group("gloo") from the environment, exactly as under torchrun: every rank a
// client of the store on MASTER_PORT (rank 0's own TCPStore no longer fights partrain's for
// the port), the script's output as it prints it.
TEST_F(LaunchTorchTest, InitProcessGroupFromTheEnvironmentOnFourRanks) {
  const CommandResult r = launch("-n 4 --no-prefix", "torch_allreduce.py");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::set<std::string> printed;
  for (std::string line; std::getline(lines, line);) printed.insert(line);
  std::set<std::string> expected;
  for (int rank = 0; rank < 4; ++rank) {
    expected.insert(fmt::format("rank {} of 4: 3 all_reduces ok", rank));
  }
  EXPECT_EQ(printed, expected) << r.out;
  // torchrun's notice, as partrain gives it: OMP_NUM_THREADS was not set.
  EXPECT_TRUE(contains(r.err, "OMP_NUM_THREADS=1")) << r.err;
}

// A script decorated with torch's @record raises on rank 2: its exception and the last lines of
// its traceback, read back from its TORCHELASTIC_ERROR_FILE as torchrun does, are in the failure
// summary; the others are stopped; the launcher exits with rank 2's code, as for built-in
// workloads.
TEST_F(LaunchTorchTest, AnExceptionRecordedByRecordIsInTheFailureSummary) {
  const CommandResult r = launch("-n 4 --grace 5s", "torch_record_raise.py");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 2 (node 0, host ")) << r.err;
  EXPECT_TRUE(contains(r.err, "failed first with exit code 1")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 2 raised ValueError: rank 2 found a bad batch (recorded in "
                              "its error file by torch's @record)"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "the last ")) << r.err;
  EXPECT_TRUE(contains(r.err, "    ValueError: rank 2 found a bad batch\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "in check_the_batch")) << r.err;
  EXPECT_TRUE(contains(r.err, "the other ranks were stopped; exiting with 1 (rank 2's exit code)"))
      << r.err;
  // The others were stopped, not left to their 120 s sleep.
  EXPECT_FALSE(contains(r.err, "has not stopped: sending SIGKILL")) << r.err;
}

}  // namespace
}  // namespace partrain
