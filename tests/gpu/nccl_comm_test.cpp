// NCCL communicator on a real GPU (label gpu): skipped, never passed, without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "runner/comm/nccl_comm.h"
#include "runner/rendezvous/in_memory_store.h"
#include "tests/gpu/visible_gpus.h"
#include "tests/integration/command_runner.h"

namespace partrain::comm {
namespace {

using testing::visible_gpus;

TEST(NcclComm, WorldOfOneCollectivesOnDeviceMemory) {
  if (visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  auto store = std::make_shared<rendezvous::InMemoryStore>();
  auto comm = create_nccl_comm(store, 0, 1, NcclCommOptions{}, "gpu-test");
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();
  std::vector<float> host(1023);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 13) - 6;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), host.size() * sizeof(float)), cudaSuccess);
  cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  ASSERT_TRUE((*comm)->all_reduce(device, device, host.size(), DType::kF32, ReduceOp::kSum).is_ok());
  ASSERT_TRUE((*comm)->barrier().is_ok());
  std::vector<float> back(host.size());
  cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(back, host);  // a world of one reduces to itself
  cudaFree(device);
}

TEST(NcclComm, BenchmarkEveryOpChecked) {
  int gpus = visible_gpus();
  if (gpus < 1) GTEST_SKIP() << "no GPU visible";
  std::string ranks = std::to_string(gpus);
  auto r = testing::run_partrain("bench collectives --backend nccl -n " + ranks +
                                 " --op all -b 8 -e 64M -f 8 -w 2 --iters 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["wrong"], 0);
  EXPECT_EQ(doc["backend"], "nccl");
}

}  // namespace
}  // namespace partrain::comm
