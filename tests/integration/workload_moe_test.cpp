// The built-in gpt as a mixture of experts through `partrain launch --workload gpt --experts`:
// every layout (dp, ep drawn from dp, tp, sp, pp, ZeRO 1-3, full recompute) computes what one
// rank computes, losses and final parameter norm within 1e-4 relative (fp32 on the CPU), dropless
// and with a capacity factor that drops tokens, with shared experts and leading dense layers;
// the routing's statistics are the whole micro-batch's, so the run summary's expert load is the
// same in every layout; and a mixture the run cannot use is refused before any rank starts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

constexpr int kSteps = 4;
const char* kModel =
    "--workload gpt --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3 "
    "--global-batch 4";

// Routed experts only, dropless; the same with an expert's capacity at an even share (tokens are
// dropped: the routing is uneven); shared experts beside one routed expert per token, after a
// dense first layer.
const char* kDropless = "--experts 4 --top-k 2 --moe-ffn 64";
const char* kCapacity = "--experts 4 --top-k 2 --moe-ffn 64 --capacity-factor 1";
const char* kShared =
    "--experts 4 --top-k 1 --moe-ffn 32 --shared-experts 1 --dense-layers 1 "
    "--capacity-factor 1.25";

nlohmann::json run_moe(const std::string& layout, const std::string& experts, int layers = 2) {
  const std::string args = fmt::format("-q launch {} {} --layers {} {} --steps {} --json", layout,
                                       kModel, layers, experts, kSteps);
  CommandResult r = run_partrain(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// One rank with the whole global batch as its micro-batch: the statistics' micro-batch is the
// same as every layout's below (dp x micro-batch = the global batch).
const nlohmann::json& reference(const std::string& experts) {
  static std::map<std::string, nlohmann::json> cache;
  auto found = cache.find(experts);
  if (found == cache.end()) {
    found = cache.emplace(experts, run_moe("-n 1 --micro-batch 4", experts)).first;
  }
  return found->second;
}

// The routing of rank 0's MoE layers in `run` (under pp, the first stage's) is the reference's:
// the same choices and drops, the load-balancing loss within float rounding.
void expect_same_load(const nlohmann::json& want, const nlohmann::json& run,
                      const std::string& what) {
  ASSERT_FALSE(run["expert_load"].empty()) << what;
  for (const nlohmann::json& layer : run["expert_load"]) {
    const nlohmann::json& ref = want["expert_load"][layer["layer"].get<size_t>()];
    EXPECT_EQ(layer["tokens_per_expert"], ref["tokens_per_expert"]) << what;
    EXPECT_EQ(layer["dropped_tokens"], ref["dropped_tokens"]) << what;
    EXPECT_NEAR(layer["aux_loss"].get<double>(), ref["aux_loss"].get<double>(), 1e-6) << what;
  }
}

class MoeEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeEquivalence, MatchesOneRankDroplessAndWithACapacity) {
  for (const char* experts : {kDropless, kCapacity}) {
    const nlohmann::json run = run_moe(GetParam(), experts);
    expect_equivalent(reference(experts), run, fmt::format("{} {}", GetParam(), experts));
    // The routing is counted over the whole micro-batch: the same in every layout.
    expect_same_load(reference(experts), run, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeEquivalence,
    ::testing::Values("-n 2 --micro-batch 2",                       // dp 2, every expert
                      "-n 2 --micro-batch 2 --ep 2",                // dp 2 ep 2
                      "-n 4 --micro-batch 1 --ep 2",                // dp 4 ep 2
                      "-n 4 --micro-batch 1 --ep 4",                // one expert a rank
                      "-n 2 --tp 2 --micro-batch 4",                // tp 2
                      "-n 2 --tp 2 --sp --micro-batch 4",           // sp
                      "-n 2 --pp 2 --micro-batch 4",                // pp 2
                      "-n 4 --dp 2 --tp 2 --ep 2 --micro-batch 2",  // dp 2 ep 2 x tp 2
                      "-n 2 --ep 2 --zero 1 --micro-batch 2",       // ZeRO-1
                      "-n 2 --ep 2 --zero 3 --micro-batch 2",       // FSDP
                      "-n 4 --ep 2 --zero 2 --micro-batch 1",       // ZeRO-2, edp 2
                      "-n 2 --ep 2 --micro-batch 2 --recompute full",
                      // memory out of the host's reach: the routing reaches it by device calls
                      "-n 2 --ep 2 --micro-batch 2 --device cpu-isolated"));

// Shared experts and a dense first layer: a pipeline stage without experts beside one with.
TEST(Moe, SharedExpertsAndDenseLayersMatchOneRank) {
  for (const char* layout :
       {"-n 2 --ep 2 --micro-batch 2", "-n 4 --ep 4 --zero 1 --micro-batch 1",
        "-n 2 --tp 2 --sp --micro-batch 4", "-n 4 --pp 2 --ep 2 --zero 2 --micro-batch 2"}) {
    expect_equivalent(reference(kShared), run_moe(layout, kShared), layout);
  }
}

// Two micro-batches a step on dp 2: ZeRO-2 and FSDP reduce-scatter each micro-batch's gradients
// while the next one routes (an all-gather on the same dp group), and the pipeline's stages route
// theirs in the schedule's order; the routing's micro-batches are DDP's.
TEST(Moe, ShardedStatesAndPipelinesOverSeveralMicroBatches) {
  const nlohmann::json ddp = run_moe("-n 2 --ep 2 --micro-batch 1", kCapacity);
  for (const char* layout :
       {"-n 2 --ep 2 --zero 3 --micro-batch 1", "-n 4 --ep 2 --pp 2 --zero 2 --micro-batch 1"}) {
    expect_equivalent(ddp, run_moe(layout, kCapacity), layout);
  }
}

// Interleaved 1F1B with a mixture in every virtual stage, against one rank that runs the same
// micro-batches (the routing's statistics are each micro-batch's).
TEST(Moe, InterleavedPipelineMatchesOneRank) {
  const std::string experts = std::string(kCapacity) + " --shared-experts 1";
  expect_equivalent(
      run_moe("-n 1 --micro-batch 2", experts, 4),
      run_moe("-n 2 --pp 2 --pp-schedule interleaved --vpp 2 --micro-batch 2", experts, 4),
      "interleaved");
}

// The zero-bubble schedules (split backward, DualPipeV's V) with a mixture in every stage, against
// one rank that runs the same micro-batches.
TEST(Moe, ZeroBubbleSchedulesMatchOneRank) {
  const std::string experts = std::string(kCapacity) + " --shared-experts 1";
  const nlohmann::json one = run_moe("-n 1 --micro-batch 1", experts, 4);
  for (const char* schedule : {"zb-h1", "dualpipev"}) {
    expect_equivalent(
        one,
        run_moe(fmt::format("-n 2 --pp 2 --pp-schedule {} --micro-batch 1", schedule), experts, 4),
        schedule);
  }
}

// Without the load-balancing loss (whose statistics are each micro-batch's) and without drops,
// gradient accumulation over micro-batches of one sample is the whole batch's step.
TEST(Moe, GradientAccumulationMatchesDroplessWithoutTheAuxLoss) {
  const std::string experts = std::string(kDropless) + " --moe-aux-loss-coeff 0";
  const nlohmann::json whole = run_moe("-n 1 --micro-batch 4", experts);
  expect_equivalent(whole, run_moe("-n 2 --ep 2 --micro-batch 1", experts), "accumulation");
  // The load-balancing loss is trained on: a weight of 1 changes the steps after the first.
  const nlohmann::json weighted =
      run_moe("-n 1 --micro-batch 4", std::string(kDropless) + " --moe-aux-loss-coeff 1");
  const double last = whole["losses"][kSteps - 1].get<double>();
  EXPECT_EQ(weighted["losses"][0], whole["losses"][0]);
  EXPECT_GT(std::abs(weighted["losses"][kSteps - 1].get<double>() - last), 1e-3 * last);
}

// The summary's routing: every token's k choices counted once, drops only with a capacity, and
// ep shards the experts' weights (a rank of ep 2 holds half of them).
TEST(Moe, TheSummaryCountsTheRoutingAndEpShardsTheExperts) {
  const nlohmann::json& dropless = reference(kDropless);
  const nlohmann::json& capped = reference(kCapacity);
  ASSERT_EQ(capped["expert_load"].size(), 2u);  // both layers route
  for (const nlohmann::json* run : {&dropless, &capped}) {
    for (const nlohmann::json& layer : (*run)["expert_load"]) {
      int64_t choices = 0;
      for (const nlohmann::json& tokens : layer["tokens_per_expert"])
        choices += tokens.get<int64_t>();
      EXPECT_EQ(choices, kSteps * 4 * 32 * 2);  // steps x samples x tokens x top-k
      // 1 exactly when balanced; a freshly initialised router is nearly so.
      EXPECT_NEAR(layer["aux_loss"].get<double>(), 1.0, 0.1);
    }
  }
  EXPECT_EQ(dropless["expert_load"][0]["dropped_tokens"], 0);
  EXPECT_GT(capped["expert_load"][0]["dropped_tokens"].get<int64_t>() +
                capped["expert_load"][1]["dropped_tokens"].get<int64_t>(),
            0);
  const double whole =
      run_moe("-n 2 --micro-batch 2", kDropless)["memory_peak_bytes"]["0"]["params"];
  const double sharded =
      run_moe("-n 2 --ep 2 --micro-batch 2", kDropless)["memory_peak_bytes"]["0"]["params"];
  // 2 layers x 4 experts x (2 x 64 x 64 + 64 + 64) floats; ep 2 keeps half of them.
  const double experts = 2.0 * 4 * (2 * 64 * 64 + 64 + 64) * 4;
  EXPECT_NEAR(whole - sharded, experts / 2, 1.0);
}

TEST(Moe, MixturesTheRunCannotUseAreRefusedBeforeAnyRankStarts) {
  struct Case {
    const char* args;
    const char* names;
  };
  for (const Case& c : {
           Case{"-n 1 --experts 2 --top-k 3", "top_k (3) must be between 1 and experts (2)"},
           Case{"-n 2 --ep 2 --experts 3 --top-k 1", "--ep 2 must divide the 3 routed experts"},
           Case{"-n 3 --ep 2 --experts 4 --top-k 1",
                "--ep 2 must divide --dp 3: expert-parallel ranks are drawn from the "
                "data-parallel ones"},
           Case{"-n 2 --ep 2", "--ep 2 shards a mixture of experts' experts"},
           Case{"-n 1 --top-k 2", "top_k is for a mixture of experts: give experts too"},
           Case{"-n 1 --experts 4 --top-k 1 --dense-layers 4 --layers 4",
                "dense_layers (4) must be fewer than the 4 layers"},
           Case{"-n 2 --tp 2 --experts 4 --top-k 1 --moe-ffn 33",
                "--moe-ffn 33 is not divisible by --tp 2"},
           Case{"-n 1 --experts 4 --top-k 1 --precision bf16",
                "the mixture of experts trains in fp32 only"},
           Case{"-n 1 --workload mlp --experts 4 --top-k 1", "applies to --workload gpt only"},
       }) {
    const bool names_workload = std::string(c.args).find("--workload") != std::string::npos;
    CommandResult r =
        run_partrain(std::string(names_workload ? "launch " : "launch --workload gpt ") + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("rendezvous on"), std::string::npos) << "a rank started: " << c.args;
  }
}

}  // namespace
}  // namespace partrain::testing
