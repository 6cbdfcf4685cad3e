#include "runner/launch/worker_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace partrain::launch {
namespace {

std::map<std::string, std::string> as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> vars;
  for (const auto& assignment : env) {
    size_t eq = assignment.find('=');
    EXPECT_TRUE(vars.emplace(assignment.substr(0, eq), assignment.substr(eq + 1)).second)
        << "duplicate " << assignment;
  }
  return vars;
}

RunContext two_nodes_of_four() {
  RunContext run;
  run.run_id = "run-7";
  run.rdzv_id = "job42";
  run.token = "secret";
  run.master_addr = "node01";
  run.master_port = 29500;
  run.nnodes = 2;
  run.node_rank = 1;
  run.nproc_per_node = 4;
  return run;
}

TEST(WorkerEnv, TorchrunContractForNodeOneLocalRankTwo) {
  auto vars = as_map(worker_environment({"HOME=/root"}, {}, two_nodes_of_four(), 2));
  EXPECT_EQ(vars["RANK"], "6");
  EXPECT_EQ(vars["LOCAL_RANK"], "2");
  EXPECT_EQ(vars["WORLD_SIZE"], "8");
  EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(vars["GROUP_RANK"], "1");
  EXPECT_EQ(vars["ROLE_RANK"], "6");
  EXPECT_EQ(vars["ROLE_WORLD_SIZE"], "8");
  EXPECT_EQ(vars["MASTER_ADDR"], "node01");
  EXPECT_EQ(vars["MASTER_PORT"], "29500");
  EXPECT_EQ(vars["TORCHELASTIC_RUN_ID"], "job42");
  EXPECT_EQ(vars["PARTRAIN_RUN_ID"], "run-7");
  EXPECT_EQ(vars["PARTRAIN_TOKEN"], "secret");
  EXPECT_EQ(vars["PARTRAIN_NNODES"], "2");
  EXPECT_EQ(vars["PARTRAIN_NODE_RANK"], "1");
  EXPECT_EQ(vars["HOME"], "/root");
  EXPECT_EQ(vars["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(vars["ROLE_NAME"], "default");
  EXPECT_EQ(vars["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(vars["TORCHELASTIC_MAX_RESTARTS"], "0");
  EXPECT_EQ(vars["TORCHELASTIC_USE_AGENT_STORE"], "False");
  EXPECT_EQ(vars["TORCHELASTIC_ERROR_FILE"], "");
  EXPECT_EQ(vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(vars["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(vars["PARTRAIN_STORE_TIMEOUT"], "300000000000ns");
}

// A command's store speaks TCPStore: torch's ranks are its clients, as with torchrun's agent
// store, and each rank has its own error file for @record.
TEST(WorkerEnv, AgentStoreAndPerRankErrorFiles) {
  RunContext run = two_nodes_of_four();
  run.agent_store = true;
  run.error_file_dir = "/tmp/flight-x";
  run.rdzv_timeout = std::chrono::seconds(30);
  auto vars = as_map(worker_environment({"TORCH_NCCL_ASYNC_ERROR_HANDLING=0"}, {}, run, 3));
  EXPECT_EQ(vars["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(vars["TORCHELASTIC_ERROR_FILE"], "/tmp/flight-x/rank_7.torch-error");
  EXPECT_EQ(vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0") << "the user's choice stands";
  auto buffered = as_map(worker_environment({"PYTHONUNBUFFERED="}, {}, run, 3));
  EXPECT_EQ(buffered["PYTHONUNBUFFERED"], "") << "the user's choice stands";
  EXPECT_EQ(vars["PARTRAIN_STORE_TIMEOUT"], "30000000000ns");
}

TEST(WorkerEnv, LauncherFlagVariablesAreStrippedAndInheritedRanksReplaced) {
  std::vector<std::string> base{"PARTRAIN_NPROC_PER_NODE=4", "PARTRAIN_GRACE=1s", "RANK=99",
                                "WORLD_SIZE=100", "OMP_NUM_THREADS=8", "PARTRAIN_OTHER=kept"};
  auto vars = as_map(worker_environment(
      base, {"PARTRAIN_NPROC_PER_NODE", "PARTRAIN_GRACE"}, two_nodes_of_four(), 0));
  EXPECT_EQ(vars.count("PARTRAIN_NPROC_PER_NODE"), 0u);
  EXPECT_EQ(vars.count("PARTRAIN_GRACE"), 0u);
  EXPECT_EQ(vars["PARTRAIN_OTHER"], "kept");
  EXPECT_EQ(vars["RANK"], "4");
  EXPECT_EQ(vars["WORLD_SIZE"], "8");
  EXPECT_EQ(vars["OMP_NUM_THREADS"], "8");  // the user's choice stands
}

TEST(WorkerEnv, SingleWorkerKeepsOpenMpThreads) {
  RunContext run = two_nodes_of_four();
  run.nproc_per_node = 1;
  auto vars = as_map(worker_environment({}, {}, run, 0));
  EXPECT_EQ(vars.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(vars["RANK"], "1");
  EXPECT_EQ(vars["WORLD_SIZE"], "2");
}

}  // namespace
}  // namespace partrain::launch
