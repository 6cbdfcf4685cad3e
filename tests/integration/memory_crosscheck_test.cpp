// The memory estimator against what the built-in workloads measure (issue 5, item 6): for each
// implemented layout, `partrain memory` for the same model and layout vs the per-category peaks of
// `partrain launch --json`: params, grads and optimizer within 1%, activations within 15%, the
// total within 10% (the estimate has no workspace line; the measured total has one).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

const std::string kDims = "--layers 4 --hidden 256 --heads 8 --seq 128 --vocab 512";
const std::string kMlpDims = "--layers 4 --hidden 256";

struct Workload {
  const char* name;   // launch's --workload
  const char* model;  // memory's --model
  const std::string& dims;
};
const Workload kGpt = {"gpt", "builtin-gpt", kDims};
const Workload kMlp = {"mlp", "builtin-mlp", kMlpDims};

nlohmann::json json_of(const std::string& args) {
  CommandResult r = run_partrain(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

struct Tolerance {
  const char* category;
  double relative;
};

// `partrain launch` of the layout (with `launch_flags`) against `partrain memory` for the same
// layout and `recipe`, per rank: each category within its tolerance. Pipelines: rank r is stage
// r in these layouts (dp = tp = 1), checked stage by stage.
void compare_with_estimate(const char* ranks, const char* layout, const std::string& launch_flags,
                           const char* recipe, std::initializer_list<Tolerance> tolerances,
                           const Workload& workload = kGpt) {
  nlohmann::json measured =
      // Two steps: FSDP prefetches from the second on, in the order the first recorded.
      json_of(fmt::format("-q launch -n {} --workload {} {} {} --steps 2 {} --json", ranks,
                          workload.name, workload.dims, layout, launch_flags));
  nlohmann::json estimate =
      // --bucket-size 0: the workload's DDP reduces gradients in place (PyTorch's
      // gradient_as_bucket_view), with no bucket copies.
      json_of(fmt::format("memory --model {} {} {} --precision {} --reserve 0 --gpu "
                          "cpu --bucket-size 0 --per-stage --json",
                          workload.model, workload.dims, layout, recipe));
  ASSERT_FALSE(measured.is_discarded());
  ASSERT_FALSE(estimate.is_discarded());
  const auto& stages = estimate["stages"];
  for (size_t rank = 0; rank < stages.size(); ++rank) {
    const auto& m = measured["memory_peak_bytes"][std::to_string(rank)];
    const auto& e = stages.size() > 1 ? stages[rank]["per_gpu_bytes"] : estimate["per_gpu_bytes"];
    for (const Tolerance& t : tolerances) {
      const double want = e[t.category].get<double>();
      EXPECT_NEAR(m[t.category].get<double>(), want, t.relative * want)
          << t.category << " with " << layout << " " << launch_flags << ", rank " << rank;
    }
  }
}

using Layout = std::pair<const char*, const char*>;  // ranks, layout flags

// Every implemented layout, in each recipe.
const Layout kLayouts[] = {
    {"1", "--micro-batch 2"},
    {"1", "--micro-batch 2 --recompute selective"},
    {"1", "--micro-batch 2 --recompute full"},
    {"2", "--dp 2 --micro-batch 1"},
    {"2", "--dp 2 --zero 1 --micro-batch 1"},
    {"2", "--tp 2 --micro-batch 2"},
    {"2", "--tp 2 --sp --micro-batch 2"},
    // ZeRO-2 stages two layers' gradients (comm) that --bucket-size 0 does not model: in fp32
    // the total lands ~9.6% over the estimate, inside the 10%.
    {"2", "--dp 2 --zero 2 --micro-batch 1"},
    {"2", "--dp 2 --zero 3 --micro-batch 1"},
    // Hybrids (HSDP): the states over shard groups of 2, each rank holding half of them.
    {"4", "--dp 4 --zero 1 --shard 2 --micro-batch 1"},
    {"4", "--dp 4 --zero 3 --shard 2 --micro-batch 1"},
    {"2", "--pp 2 --micro-batch 1 --global-batch 4"},
    {"2", "--pp 2 --pp-schedule gpipe --micro-batch 1 --global-batch 4"},
    {"4", "--pp 4 --micro-batch 1 --global-batch 4"},
};

class MemoryCrossCheck : public ::testing::TestWithParam<Layout> {};

TEST_P(MemoryCrossCheck, EstimateMatchesMeasuredPeaks) {
  const auto& [ranks, layout] = GetParam();
  compare_with_estimate(ranks, layout, "", "fp32",
                        {{"params", 0.01},
                         {"grads", 0.01},
                         {"optimizer", 0.01},
                         {"activations", 0.15},
                         {"total", 0.10}});
}

INSTANTIATE_TEST_SUITE_P(Layouts, MemoryCrossCheck, ::testing::ValuesIn(kLayouts));

// The lecture's deep MLP keeps, as autograd would, each layer's input and GeLU input (split by
// the alternating column- and row-parallel layers), the loss's input on the last stage, and the
// stage output until it is sent: exact, where it had kept every layer's output beside the next
// layer's copy of it (+50%) and the last layer's GeLU input under full recompute.
const Layout kMlpLayouts[] = {
    {"2", "--dp 2 --micro-batch 64"},
    {"2", "--dp 2 --micro-batch 64 --recompute full"},
    {"2", "--tp 2 --micro-batch 64"},
    {"2", "--tp 2 --micro-batch 64 --recompute full"},
    {"2", "--pp 2 --micro-batch 16 --global-batch 64"},
    {"2", "--pp 2 --pp-schedule gpipe --micro-batch 16 --global-batch 64"},
    {"2", "--pp 2 --micro-batch 16 --global-batch 64 --recompute full"},
    {"2", "--dp 2 --zero 3 --micro-batch 64"},
};

class MemoryCrossCheckMlp : public ::testing::TestWithParam<Layout> {};

TEST_P(MemoryCrossCheckMlp, EstimateMatchesMeasuredPeaks) {
  const auto& [ranks, layout] = GetParam();
  compare_with_estimate(
      ranks, layout, "", "fp32",
      {{"params", 0.01}, {"grads", 0.01}, {"optimizer", 0.01}, {"activations", 0.01}}, kMlp);
}

INSTANTIATE_TEST_SUITE_P(Layouts, MemoryCrossCheckMlp, ::testing::ValuesIn(kMlpLayouts));

// The mixture of experts (fp32 only: the workload refuses it in bf16), the flags the same for
// both commands: the experts' parameters, gradients and optimizer states sharded over ep (and
// ZeRO over the expert-data ranks), the dispatched tokens' activations at top-k (dropless) or
// at the capacity factor. Measured at 4 experts top-2 of 512: activations -8% (one rank), +3%
// (ep 2), -12% (tp 2); the all_to_all staging (comm) is not in the estimate, ~4% of the total.
const Layout kMoeLayouts[] = {
    {"1", "--micro-batch 2 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2", "--dp 2 --ep 2 --micro-batch 1 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2", "--dp 2 --ep 2 --zero 1 --micro-batch 1 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2", "--dp 2 --ep 2 --zero 3 --micro-batch 1 --experts 4 --top-k 2 --moe-ffn 512"},
    // A hybrid without ep: the experts shard over the shard group as the dense weights do.
    {"4", "--dp 4 --zero 3 --shard 2 --micro-batch 1 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2", "--tp 2 --micro-batch 2 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2", "--pp 2 --micro-batch 1 --global-batch 4 --experts 4 --top-k 2 --moe-ffn 512"},
    {"2",
     "--dp 2 --ep 2 --micro-batch 1 --experts 8 --top-k 2 --moe-ffn 256 --shared-experts 1 "
     "--dense-layers 1 --capacity-factor 1.25"},
};

INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, MemoryCrossCheck, ::testing::ValuesIn(kMoeLayouts));

// The bf16 recipes store the model states as `partrain memory` counts them (bf16 parameters; fp32
// or bf16 gradients; fp32 master, m and v: 2 + 4 + 12 or 2 + 2 + 12 bytes a parameter), sharded
// as the layout shards them, and the activations in bf16 (2 bytes; the logits and the layernorm
// statistics fp32), as the recipes assume. The total is not compared: its workspace holds the
// fp32 copies the ops read and write (an op's activations, the CPU sgemm's widened weights and
// products), which the estimate has no line for: at micro-batch 2, 6.3 MB (bf16-fp32grad) and
// 7.4 MB (bf16-mixed) beside fp32's 2.9 MB, the totals +7.2% and +9.6% over the estimate, up to
// +21% and +30% on pp 4's one-layer stages (and +23% for ZeRO-2's unmodelled fp32 staging).
class MemoryCrossCheckBf16 : public ::testing::TestWithParam<Layout> {};

TEST_P(MemoryCrossCheckBf16, ModelStatesAndActivationsMatchTheBf16Recipes) {
  const auto& [ranks, layout] = GetParam();
  for (const char* recipe : {"bf16-fp32grad", "bf16-mixed"}) {
    compare_with_estimate(
        ranks, layout, std::string("--precision ") + recipe, recipe,
        {{"params", 0.01}, {"grads", 0.01}, {"optimizer", 0.01}, {"activations", 0.15}});
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MemoryCrossCheckBf16, ::testing::ValuesIn(kLayouts));

}  // namespace
}  // namespace partrain::testing
