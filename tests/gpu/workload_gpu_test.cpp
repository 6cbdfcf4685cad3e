// The built-in workloads on a real GPU (label gpu): skipped, never passed, without one. fp32 on
// the CUDA device (its fp32 GEMMs run without TF32) computes what the CPU device computes to
// the equivalence tests' 1e-4: four ranks sharing the GPU through Gloo, and NCCL with one rank
// per GPU (world size 1 on a one-GPU machine, more where there are more GPUs).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/gpu/visible_gpus.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

constexpr const char* kModel =
    "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3 "
    "--global-batch 4 --steps 6 --json";

nlohmann::json train(const std::string& layout) {
  CommandResult r = run_partrain(std::string("-q launch ") + layout + " " + kModel);
  EXPECT_EQ(r.exit_code, 0) << layout << "\n" << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

class GpuWorkload : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  }
  static const nlohmann::json& cpu_reference() {
    static const nlohmann::json reference = train("-n 1 --device cpu --micro-batch 4");
    return reference;
  }
};

TEST_F(GpuWorkload, FourRanksSharingTheGpuThroughGlooMatchTheCpu) {
  for (const char* layout : {"-n 4 --strategy ddp --micro-batch 1", "-n 4 --dp 2 --tp 2 --sp "
                             "--micro-batch 1", "-n 4 --zero 3 --micro-batch 1",
                             "-n 4 --pp 2 --tp 2 --micro-batch 1"}) {
    nlohmann::json run = train(std::string(layout) + " --device cuda --comm gloo");
    expect_equivalent(cpu_reference(), run, layout);
    EXPECT_EQ(run["device"].get<std::string>().rfind("cuda:", 0), 0u) << run["device"];
  }
}

TEST_F(GpuWorkload, NcclOneRankPerGpuMatchesTheCpu) {
  const int gpus = visible_gpus();
  nlohmann::json one = train("-n 1 --device cuda --comm nccl --micro-batch 4");
  expect_equivalent(cpu_reference(), one, "nccl, 1 rank");
  if (gpus >= 2) {
    const int n = gpus >= 4 ? 4 : 2;
    nlohmann::json many = train("-n " + std::to_string(n) +
                                " --device cuda --comm nccl --strategy ddp --micro-batch 1");
    expect_equivalent(cpu_reference(), many, "nccl, " + std::to_string(n) + " ranks");
  }
}

// bf16 on the GPU against the CPU's bf16 reference (the same bf16-rounded GEMM operands,
// attention's included, multiplied by sgemm; the same bf16 parameter, gradient and activation
// storage): the GEMMs agree to the order of their fp32 sums, which can move a value next to a
// rounding boundary to the other bf16 neighbour; 1e-3 over six steps. bf16-fp32grad rounds per
// element, so FSDP on two ranks compares with the one-rank CPU run; bf16-mixed rounds gradient
// sums, so its CPU reference has the same layout. The device name shows the GPU really ran bf16.
TEST_F(GpuWorkload, Bf16TrainsAsTheCpusBf16Reference) {
  struct Case {
    const char* recipe;
    const char* cpu_layout;
    const char* gpu_layout;
  };
  const char* one_rank = "-n 1 --micro-batch 4";
  const char* nccl = "-n 1 --comm nccl --micro-batch 4";
  for (const Case& c : {Case{"bf16-fp32grad", one_rank, nccl},
                        Case{"bf16-fp32grad", one_rank,
                             "-n 2 --comm gloo --strategy fsdp --micro-batch 2"},
                        Case{"bf16-mixed", one_rank, nccl}}) {
    const std::string precision = std::string(" --precision ") + c.recipe;
    const nlohmann::json cpu = train(std::string(c.cpu_layout) + " --device cpu" + precision);
    nlohmann::json run = train(std::string(c.gpu_layout) + " --device cuda" + precision);
    EXPECT_NE(run["device"].get<std::string>().find("bf16 GEMMs"), std::string::npos)
        << run["device"];
    expect_equivalent(cpu, run, std::string(c.gpu_layout) + " in " + c.recipe, 1e-3);
  }
}

TEST_F(GpuWorkload, MoreRanksThanGpusWithNcclIsRefusedNamingGloo) {
  const int gpus = visible_gpus();
  CommandResult r = run_partrain("launch -n " + std::to_string(gpus + 1) +
                                 " --device cuda --comm nccl " + kModel);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--comm gloo"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace partrain::testing
