// The 20-step versions of the workload equivalence checks (`ctest -L long`): every layout of the
// 6-step suite in workload_test.cpp, trained 20 steps, against the single-rank run.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

constexpr int kSteps = 20;

struct Case {
  const char* workload;  // model flags
  const char* layout;
};

nlohmann::json run(const std::string& model, const std::string& layout, const char* recompute) {
  std::string args = fmt::format("-q launch {} {} --steps {} --recompute {} --json", layout, model,
                                 kSteps, recompute);
  CommandResult r = run_partrain(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

class LongEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(LongEquivalence, TwentyStepsMatchOneRank) {
  const Case& c = GetParam();
  for (const char* recompute : {"none", "full"}) {
    nlohmann::json one = run(c.workload, "-n 1 --micro-batch 1", recompute);
    nlohmann::json parallel = run(c.workload, c.layout, recompute);
    ASSERT_FALSE(one.is_discarded());
    ASSERT_FALSE(parallel.is_discarded());
    ASSERT_EQ(parallel["losses"].size(), static_cast<size_t>(kSteps));
    expect_equivalent(one, parallel, std::string(c.layout) + " recompute " + recompute);
  }
}

constexpr const char* kGpt =
    "--workload gpt --layers 8 --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3 "
    "--global-batch 4";
constexpr const char* kMlp = "--workload mlp --layers 4 --hidden 64 --lr 1e-2 --global-batch 4";

INSTANTIATE_TEST_SUITE_P(
    Layouts, LongEquivalence,
    ::testing::Values(Case{kGpt, "-n 2 --strategy ddp --micro-batch 2"},
                      Case{kGpt, "-n 4 --strategy ddp --micro-batch 1"},
                      Case{kGpt, "-n 2 --strategy zero1 --micro-batch 2"},
                      Case{kGpt, "-n 2 --tp 2 --micro-batch 4"},
                      Case{kGpt, "-n 4 --tp 4 --micro-batch 4"},
                      Case{kGpt, "-n 2 --tp 2 --sp --micro-batch 4"},
                      Case{kGpt, "-n 2 --pp 2 --pp-schedule gpipe --micro-batch 1"},
                      Case{kGpt, "-n 4 --pp 4 --micro-batch 1"},
                      Case{kGpt, "-n 4 --pp 4 --pp-schedule interleaved --vpp 2 --micro-batch 1"},
                      Case{kGpt, "-n 2 --pp 2 --pp-split 6,2 --micro-batch 1"},
                      Case{kGpt, "-n 4 --dp 2 --tp 2 --micro-batch 2"},
                      Case{kGpt, "-n 4 --dp 2 --pp 2 --micro-batch 1"},
                      Case{kGpt, "-n 4 --tp 2 --pp 2 --micro-batch 1"},
                      Case{kGpt, "-n 8 --dp 2 --tp 2 --pp 2 --micro-batch 1"},
                      Case{kMlp, "-n 2 --strategy ddp --micro-batch 2"},
                      Case{kMlp, "-n 2 --tp 2 --micro-batch 4"},
                      Case{kMlp, "-n 2 --pp 2 --micro-batch 1"},
                      Case{kGpt, "-n 2 --strategy zero2 --micro-batch 2"},
                      Case{kGpt, "-n 4 --strategy fsdp --micro-batch 1"},
                      Case{kGpt, "-n 4 --dp 2 --pp 2 --zero 3 --micro-batch 1"}),
    // Test names from the layout: "n4_dp2_pp2_zero3_micro_batch1" rather than object bytes.
    [](const ::testing::TestParamInfo<Case>& param_info) {
      std::string name = std::string(param_info.param.workload).find("mlp") != std::string::npos
                             ? "mlp_"
                             : "gpt_";
      for (char c : std::string(param_info.param.layout)) {
        if (std::isalnum(static_cast<unsigned char>(c))) name += c;
        else if (!name.empty() && name.back() != '_') name += '_';
      }
      return name;
    });

}  // namespace
}  // namespace partrain::testing
