// Built-in workloads end to end through `partrain launch --workload`: every implemented parallel
// layout computes what one rank computes (losses and final parameter norm within 1e-4
// relative, fp32 on CPU, same seed and global batch), DDP buckets overlap backward, memory
// categories add up, and invalid layouts are refused before any rank starts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "runner/worker/cpu_binding.h"
#include "runner/workload/workload_config.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

const char* kModel =
    "--workload gpt --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3 --global-batch 4";

nlohmann::json run_workload(const std::string& layout, int steps,
                            const std::string& extra = "", int layers = 2) {
  std::string args = fmt::format("-q launch {} {} --layers {} --steps {} --json {}", layout,
                                 kModel, layers, steps, extra);
  CommandResult r = run_partrain(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << args << "\n" << r.out << r.err;
  return doc;
}

class Equivalence : public ::testing::TestWithParam<const char*> {
 protected:
  static constexpr int kSteps = 6;
  // The single-rank run, once per recompute mode.
  static const nlohmann::json& reference(const std::string& recompute) {
    static std::map<std::string, nlohmann::json> cache;
    auto found = cache.find(recompute);
    if (found == cache.end()) {
      found = cache.emplace(recompute, run_workload("-n 1 --micro-batch 4", kSteps,
                                                    "--recompute " + recompute)).first;
    }
    return found->second;
  }
};

TEST_P(Equivalence, MatchesOneRank) {
  for (const char* recompute : {"none", "full"}) {
    nlohmann::json run = run_workload(GetParam(), kSteps, std::string("--recompute ") + recompute);
    expect_equivalent(reference(recompute), run, std::string(GetParam()) + " recompute " + recompute);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Equivalence,
    ::testing::Values(
        "-n 1 --micro-batch 1",                   // gradient accumulation
        "-n 2 --strategy ddp --micro-batch 2",    // dp 2
        "-n 4 --strategy ddp --micro-batch 1",    // dp 4
        "-n 2 --tp 2 --micro-batch 4",            // tp 2
        "-n 4 --tp 4 --micro-batch 4",            // tp 4
        "-n 2 --tp 2 --sp --micro-batch 4",       // tp 2 + sp
        "-n 4 --dp 2 --tp 2 --micro-batch 2",     // dp2 x tp2
        "-n 2 --strategy zero1 --micro-batch 2",  // ZeRO-1
        "-n 4 --zero 1 --micro-batch 1", "-n 4 --tp 2 --zero 1 --micro-batch 2",
        "-n 4 --dp 2 --tp 2 --sp --micro-batch 1 --bucket-mb 0.05",
        "-n 2 --strategy zero2 --micro-batch 2",  // ZeRO-2
        "-n 4 --strategy zero2 --micro-batch 1", "-n 4 --tp 2 --zero 2 --micro-batch 2",
        "-n 2 --strategy fsdp --micro-batch 2",  // FSDP (ZeRO-3)
        "-n 4 --strategy fsdp --micro-batch 1", "-n 4 --tp 2 --zero 3 --micro-batch 2",
        "-n 4 --dp 2 --tp 2 --sp --zero 3 --micro-batch 1",
        // Hybrids (HSDP): sharded over 2, the 2 replicas all-reducing each shard.
        "-n 4 --zero 1 --shard 2 --micro-batch 1", "-n 4 --zero 2 --shard 2 --micro-batch 1",
        "-n 4 --strategy fsdp --shard 2 --micro-batch 1"));

// ZeRO over 3 ranks with a parameter count (110336) not divisible by 3: the buffers are padded to
// equal shards and the padding never changes the result.
// --cpu-bind core: each rank on a core of its own, in local-rank order, and the same training
// as unbound; more ranks than the CPUs the launcher may use is refused before any rank starts.
TEST(Workload, CpuBindGivesEachRankItsOwnCore) {
  const std::vector<int> allowed = runner::allowed_cpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU: two ranks cannot have one each";
  const std::string args = fmt::format(
      "launch -n 2 {} --layers 2 --steps 3 --cpu-bind core "
      "--no-trace --json",
      kModel);
  CommandResult bound = run_partrain(args);
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_NE(bound.err.find(fmt::format("local rank 0 bound to CPU {}\n", allowed[0])),
            std::string::npos)
      << bound.err;
  EXPECT_NE(bound.err.find(fmt::format("local rank 1 bound to CPU {}\n", allowed[1])),
            std::string::npos)
      << bound.err;
  nlohmann::json unbound = run_workload("-n 2", 3);
  nlohmann::json doc = nlohmann::json::parse(bound.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << bound.out;
  expect_equivalent(unbound, doc, "bound to cores");

  CommandResult refused = run_partrain(fmt::format(
      "launch -n {0} --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
      "--global-batch {0} --steps 1 --cpu-bind core --no-trace",
      allowed.size() + 1));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(fmt::format("need {} CPUs, and {} are allowed here",
                                         allowed.size() + 1, allowed.size())),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.err.find("[rank"), std::string::npos) << "no rank started: " << refused.err;
}

TEST(Workload, ZeroOverThreeRanksWithAnIndivisibleParameterCount) {
  const char* model = "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
                      "--lr 3e-3 --global-batch 3 --steps 6 --json";
  auto run = [&](const std::string& layout) {
    CommandResult r = run_partrain("-q launch " + layout + " " + model);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  nlohmann::json one = run("-n 1 --micro-batch 3");
  ASSERT_FALSE(one.is_discarded());
  EXPECT_EQ(one["memory_peak_bytes"]["0"]["optimizer"].get<int64_t>(), 110336 * 8);
  nlohmann::json zero1 = run("-n 3 --micro-batch 1 --zero 1");
  ASSERT_FALSE(zero1.is_discarded());
  expect_equivalent(one, zero1, "zero1 over 3 ranks");
  // ZeRO-1 pads the whole flat buffer: a third of the padded 110337 parameters, 8 bytes each.
  EXPECT_EQ(zero1["memory_peak_bytes"]["0"]["optimizer"].get<int64_t>(), 110337 / 3 * 8);
  // ZeRO-2 and FSDP pad each unit (wte 8192, wpe 2048, two layers of 49984, the final norm 128)
  // to a multiple of 3: each rank owns 2731 + 683 + 2 x 16662 + 43 = 36781 elements.
  constexpr int64_t kShard = 36781;
  for (const char* zero : {"2", "3"}) {
    nlohmann::json sharded = run(std::string("-n 3 --micro-batch 1 --zero ") + zero);
    ASSERT_FALSE(sharded.is_discarded());
    expect_equivalent(one, sharded, std::string("zero") + zero + " over 3 ranks");
    for (const char* rank : {"0", "1", "2"}) {
      const auto& m = sharded["memory_peak_bytes"][rank];
      EXPECT_EQ(m["params"].get<int64_t>(), (zero[0] == '3' ? kShard : 3 * kShard) * 4) << zero;
      EXPECT_EQ(m["grads"].get<int64_t>(), kShard * 4) << zero;
      EXPECT_EQ(m["optimizer"].get<int64_t>(), kShard * 8) << zero;
    }
  }
}

// Model states per rank at dp 2 (110336 parameters, every unit even, so no padding), fp32 AdamW:
// ZeRO-1 shards the optimizer states, ZeRO-2 the gradients too, FSDP the parameters too. The
// transient buffers of ZeRO-2 (gradient staging) and FSDP (parameter gathers) count as comm.
TEST(Workload, ZeroStagesDivideTheModelStatesByDp) {
  constexpr int64_t N = 110336;
  struct Expected {
    int64_t params, grads, optimizer;
    bool comm;
  };
  const Expected expected[] = {{N, N, 2 * N, false},
                               {N, N, N, false},
                               {N, N / 2, N, true},
                               {N / 2, N / 2, N, true}};
  int64_t comm[4] = {};
  for (int zero = 0; zero <= 3; ++zero) {
    nlohmann::json run =
        run_workload(fmt::format("-n 2 --zero {} --micro-batch 2", zero), 2);
    const Expected& e = expected[zero];
    comm[zero] = run["memory_peak_bytes"]["0"]["comm"].get<int64_t>();
    for (const char* rank : {"0", "1"}) {
      const auto& m = run["memory_peak_bytes"][rank];
      EXPECT_EQ(m["params"].get<int64_t>(), e.params * 4) << "zero " << zero;
      EXPECT_EQ(m["grads"].get<int64_t>(), e.grads * 4) << "zero " << zero;
      EXPECT_EQ(m["optimizer"].get<int64_t>(), e.optimizer * 4) << "zero " << zero;
      // DDP reduces in place and ZeRO-1 reduce-scatters in place: no comm bytes.
      EXPECT_EQ(m["comm"].get<int64_t>() > 0, e.comm) << "zero " << zero;
    }
  }
  // FSDP's parameter gathers come on top of the gradient staging both stages have.
  EXPECT_GT(comm[3], comm[2]);
}

// Activations under the bf16 recipes, to the byte: everything kept takes 2 bytes instead of 4
// except what stays fp32, the logits (N x V/t) and the statistics (layernorm mean and rstd for
// each block's two norms and the final one; under tp the vocab-parallel max and sum of exps).
// kModel at micro-batch 4: N = 128 tokens, V = 128, 2 layers.
TEST(Workload, Bf16ActivationsTakeTwoBytesSaveTheLogitsAndStatistics) {
  constexpr int64_t N = 128, V = 128, kLayers = 2;
  for (const auto& [layout, tp] : {std::pair{"-n 1 --micro-batch 4", int64_t{1}},
                                   std::pair{"-n 2 --tp 2 --micro-batch 4", int64_t{2}}}) {
    const int64_t norms = (2 * kLayers + 1) * 2 * N * 4;  // mean and rstd, fp32
    const int64_t logits = N * (V / tp) * 4;
    const int64_t vocab_parallel = tp > 1 ? 2 * N * 4 : 0;  // row max and sum of exps
    const int64_t fp32_only = norms + logits + vocab_parallel;
    const nlohmann::json fp32 = run_workload(layout, 1);
    const int64_t fp32_bytes = fp32["memory_peak_bytes"]["0"]["activations"].get<int64_t>();
    for (const char* recipe : {"bf16-mixed", "bf16-fp32grad"}) {
      const nlohmann::json bf16 = run_workload(layout, 1, std::string("--precision ") + recipe);
      EXPECT_EQ(bf16["memory_peak_bytes"]["0"]["activations"].get<int64_t>(),
                (fp32_bytes - fp32_only) / 2 + fp32_only)
          << layout << " " << recipe;
    }
  }
}

// The bf16 recipes at every ZeRO stage: the parameters take 2 bytes (sharded under FSDP), the
// gradients 4 (bf16-fp32grad) or 2 (bf16-mixed; sharded from ZeRO-2 on), and the optimizer 12
// (fp32 master, m and v, sharded from ZeRO-1 on); FSDP's gathers move bf16, so its comm peak is
// below fp32's, while ZeRO-2's (gradient staging, fp32) is the same.
TEST(Workload, Bf16StoresTheModelStatesAsTheRecipeSays) {
  constexpr int64_t N = 110336;
  struct Expected {
    int64_t params, grads, optimizer;
  };
  for (const auto& [recipe, grad_bytes] :
       {std::pair{"bf16-fp32grad", int64_t{4}}, std::pair{"bf16-mixed", int64_t{2}}}) {
    const int64_t G = grad_bytes * N;
    const Expected expected[] = {
        {2 * N, G, 12 * N}, {2 * N, G, 6 * N}, {2 * N, G / 2, 6 * N}, {N, G / 2, 6 * N}};
    for (int zero = 0; zero <= 3; ++zero) {
      const std::string layout = fmt::format("-n 2 --zero {} --micro-batch 2", zero);
      nlohmann::json run = run_workload(layout, 2, std::string("--precision ") + recipe);
      const Expected& e = expected[zero];
      for (const char* rank : {"0", "1"}) {
        const auto& m = run["memory_peak_bytes"][rank];
        EXPECT_EQ(m["params"].get<int64_t>(), e.params) << recipe << ", zero " << zero;
        EXPECT_EQ(m["grads"].get<int64_t>(), e.grads) << recipe << ", zero " << zero;
        EXPECT_EQ(m["optimizer"].get<int64_t>(), e.optimizer) << recipe << ", zero " << zero;
      }
      if (zero < 2) continue;
      const int64_t fp32_comm =
          run_workload(layout, 2)["memory_peak_bytes"]["0"]["comm"].get<int64_t>();
      const int64_t bf16_comm = run["memory_peak_bytes"]["0"]["comm"].get<int64_t>();
      if (zero == 2) {
        EXPECT_EQ(bf16_comm, fp32_comm) << recipe;
      } else {
        EXPECT_LT(bf16_comm, fp32_comm) << recipe;
      }
    }
  }
}

// Under bf16 parameters the ops read each layer's matrices as stored: no fp32 copy of a unit is
// made when it is acquired, only of its vectors (norm weights, biases). Under bf16 gradients
// (bf16-mixed) the matmuls add into them directly, with no fp32 copy of the unit's gradients
// either (DDP, ZeRO-1; ZeRO-2 and FSDP stage fp32 for their reduce-scatter, in comm). A wide
// layer over a few tokens makes such a copy the largest thing workspace could hold: hidden 256,
// one layer of 12 x 256^2 + 13 x 256 parameters (3.16 MB in fp32), 8 tokens a micro-batch. What
// is left is the CPU device's fp32 GEMM buffers (its sgemm reads and writes fp32: the widest
// weight, fc's 1024 x 256, is 1.05 MB, and so is its gradient's product under bf16-mixed) and the
// small activations.
TEST(Workload, Bf16StatesAreUsedAsStoredWithoutFp32Copies) {
  constexpr int64_t C = 256;
  constexpr int64_t kLayerFp32Bytes = (12 * C * C + 13 * C) * 4;
  static_assert(256 * 1024 < kLayerFp32Bytes / 8, "the slack below is far under a layer's copy");
  // sgemm_buffers: the CPU sgemm's fp32 buffers of fc's size (1024 x 256, 1.05 MB): its weight
  // widened, and where the matmul adds into a bf16 gradient itself, the product.
  struct Case {
    const char* layout;
    const char* recipe;
    int64_t sgemm_buffers;
  };
  for (const auto& [layout, recipe, sgemm_buffers] :
       {Case{"-n 1", "bf16-fp32grad", 1}, Case{"-n 2 --zero 2", "bf16-fp32grad", 1},
        Case{"-n 2 --zero 3", "bf16-fp32grad", 1}, Case{"-n 1", "bf16-mixed", 2},
        Case{"-n 2 --zero 1", "bf16-mixed", 2}, Case{"-n 2 --zero 3", "bf16-mixed", 1}}) {
    const std::string args = fmt::format(
        "-q launch {} --workload gpt --hidden {} --heads 4 --seq 8 --vocab 128 --layers 1 "
        "--micro-batch 1 --global-batch 2 --steps 2 --precision {} --json",
        layout, C, recipe);
    CommandResult r = run_partrain(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    const nlohmann::json run = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(run.is_discarded()) << r.out;
    const int64_t workspace = run["memory_peak_bytes"]["0"]["workspace"].get<int64_t>();
    const int64_t sgemm_bytes = sgemm_buffers * 1024 * C * 4;
    EXPECT_GE(workspace, sgemm_bytes) << layout << " " << recipe;
    // Beside them a few activations (under 256 KiB here), not a layer's 3.16 MB.
    EXPECT_LT(workspace, sgemm_bytes + 256 * 1024) << layout << " " << recipe;
  }
}

// A gpt layout of 8 layers against one rank over `global_batch` sequences per step (one
// micro-batch each), without and with full recompute; one rank's runs are shared.
void expect_gpt_layout_matches_one_rank(const std::string& layout, int global_batch) {
  auto run = [&](const std::string& ranks, const char* recompute) {
    std::string args = fmt::format(
        "-q launch {} --workload gpt --layers 8 --hidden 64 --heads 4 "
        "--seq 32 --vocab 128 --lr 3e-3 --global-batch {} --steps 6 "
        "--recompute {} --json",
        ranks, global_batch, recompute);
    CommandResult r = run_partrain(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  static std::map<std::pair<std::string, int>, nlohmann::json> reference;
  for (const char* recompute : {"none", "full"}) {
    const std::pair<std::string, int> key{recompute, global_batch};
    if (!reference.count(key)) reference[key] = run("-n 1 --micro-batch 1", recompute);
    nlohmann::json parallel = run(layout, recompute);
    ASSERT_FALSE(parallel.is_discarded());
    expect_equivalent(reference[key], parallel, layout + " recompute " + recompute);
  }
}

// Pipeline layouts: 8 layers and 4 micro-batches per step, so pp 4 with 2 virtual stages fits.
class PipelineEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineEquivalence, MatchesOneRank) { expect_gpt_layout_matches_one_rank(GetParam(), 4); }

INSTANTIATE_TEST_SUITE_P(
    Layouts, PipelineEquivalence,
    ::testing::Values("-n 2 --pp 2 --pp-schedule gpipe --micro-batch 1",
                      "-n 2 --pp 2 --pp-schedule 1f1b --micro-batch 1",
                      "-n 2 --pp 2 --pp-schedule interleaved --vpp 2 --micro-batch 1",
                      "-n 4 --pp 4 --pp-schedule gpipe --micro-batch 1",
                      "-n 4 --pp 4 --pp-schedule 1f1b --micro-batch 1",
                      "-n 4 --pp 4 --pp-schedule interleaved --vpp 2 --micro-batch 1",
                      "-n 2 --pp 2 --pp-split 6,2 --micro-batch 1",
                      "-n 4 --dp 2 --pp 2 --micro-batch 1",
                      "-n 4 --tp 2 --pp 2 --micro-batch 1",
                      "-n 2 --pp 2 --zero 1 --micro-batch 1",
                      "-n 2 --pp 2 --zero 2 --micro-batch 1",
                      "-n 4 --dp 2 --pp 2 --zero 2 --micro-batch 1",
                      "-n 4 --dp 2 --pp 2 --zero 3 --micro-batch 1",
                      "-n 8 --dp 2 --tp 2 --pp 2 --micro-batch 1"));

// The zero-bubble schedules: 8 micro-batches per step, so DualPipeV runs at pp 4 (m >= 2 pp), its
// 2 pp = 8 stages one layer each. The weight passes run later than the input gradients, and
// the V hands chunk pp - 1's output to chunk pp on the same rank; the losses and the final
// parameters stay one rank's.
class ZeroBubbleEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(ZeroBubbleEquivalence, MatchesOneRank) { expect_gpt_layout_matches_one_rank(GetParam(), 8); }

INSTANTIATE_TEST_SUITE_P(
    Layouts, ZeroBubbleEquivalence,
    ::testing::Values("-n 2 --pp 2 --pp-schedule zb-h1 --micro-batch 1",
                      "-n 4 --pp 4 --pp-schedule zb-h1 --micro-batch 1",
                      "-n 2 --pp 2 --pp-schedule dualpipev --micro-batch 1",
                      "-n 4 --pp 4 --pp-schedule dualpipev --micro-batch 1",
                      "-n 4 --dp 2 --pp 2 --pp-schedule zb-h1 --micro-batch 1",
                      "-n 4 --dp 2 --pp 2 --pp-schedule dualpipev --zero 1 --micro-batch 1",
                      "-n 4 --tp 2 --pp 2 --pp-schedule zb-h1 --sp --micro-batch 1"));

// The lecture's MLP under every layout that applies to it (no sequence parallelism).
class MlpEquivalence : public ::testing::TestWithParam<const char*> {};

TEST_P(MlpEquivalence, MatchesOneRank) {
  auto run = [](const std::string& layout, const char* recompute) {
    std::string args = fmt::format("-q launch {} --workload mlp --layers 4 --hidden 64 --lr 1e-2 "
                                   "--global-batch 4 --steps 6 --recompute {} --json",
                                   layout, recompute);
    CommandResult r = run_partrain(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  for (const char* recompute : {"none", "full"}) {
    nlohmann::json one = run("-n 1 --micro-batch 4", recompute);
    nlohmann::json parallel = run(GetParam(), recompute);
    ASSERT_FALSE(one.is_discarded());
    ASSERT_FALSE(parallel.is_discarded());
    expect_equivalent(one, parallel, std::string("mlp ") + GetParam() + " " + recompute);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MlpEquivalence,
    ::testing::Values(
        "-n 1 --micro-batch 1", "-n 2 --micro-batch 2", "-n 4 --micro-batch 1",
        "-n 2 --zero 1 --micro-batch 2", "-n 2 --tp 2 --micro-batch 4",
        "-n 4 --tp 4 --micro-batch 4", "-n 4 --dp 2 --tp 2 --micro-batch 2",
        "-n 2 --pp 2 --micro-batch 1",
        "-n 2 --pp 2 --pp-schedule interleaved --vpp 2 "
        "--micro-batch 1",
        "-n 4 --tp 2 --pp 2 --micro-batch 1", "-n 2 --zero 2 --micro-batch 2",
        "-n 2 --zero 3 --micro-batch 2", "-n 4 --dp 2 --tp 2 --zero 3 --micro-batch 2",
        "-n 4 --zero 3 --micro-batch 1", "-n 4 --pp 4 --pp-schedule gpipe --micro-batch 1",
        "-n 4 --pp 4 --pp-schedule 1f1b --micro-batch 1",
        "-n 2 --pp 2 --pp-schedule gpipe --micro-batch 1",
        "-n 2 --pp 2 --pp-split 3,1 --micro-batch 1",
        "-n 2 --pp 2 --pp-schedule zb-h1 --micro-batch 1",
        "-n 2 --pp 2 --pp-schedule dualpipev --micro-batch 1", "-n 4 --dp 2 --pp 2 --micro-batch 1",
        "-n 8 --dp 2 --tp 2 --pp 2 --micro-batch 1"));

// Both bf16 recipes on the CPU: every matmul multiplies bf16-rounded operands (the CUDA device's
// arithmetic), the parameters are stored in bf16 beside an fp32 master and the activations in
// bf16, so a run departs from fp32 by bf16's rounding, no more. bf16-fp32grad rounds per element
// only (and a pipeline's boundary gradient once), so every layout (each storing and gathering its
// parameters its own way) computes what one rank computes, to 1e-4.
// bf16-mixed also rounds each gradient sum (per micro-batch, per all-reduce hop), which depends
// on the layout: 1e-3, and measurably apart from bf16-fp32grad.
TEST(Workload, Bf16OnTheCpuInEveryLayout) {
  constexpr int kSteps = 6;
  const nlohmann::json fp32 = run_workload("-n 1 --micro-batch 4", kSteps);
  const char* layouts[] = {"-n 2 --strategy ddp --micro-batch 2", "-n 2 --tp 2 --micro-batch 4",
                           "-n 2 --tp 2 --sp --micro-batch 4",
                           "-n 2 --strategy zero1 --micro-batch 2",
                           "-n 2 --strategy zero2 --micro-batch 2",
                           "-n 2 --strategy fsdp --micro-batch 2", "-n 1 --zero 3 --micro-batch 4",
                           "-n 2 --pp 2 --micro-batch 1"};
  std::map<std::string, nlohmann::json> one_rank;
  for (const auto& [recipe, tolerance] : {std::pair{"bf16-fp32grad", 1e-4},
                                          std::pair{"bf16-mixed", 1e-3}}) {
    const std::string flags = std::string("--precision ") + recipe;
    const nlohmann::json bf16 = run_workload("-n 1 --micro-batch 4", kSteps, flags);
    ASSERT_EQ(bf16["losses"].size(), fp32["losses"].size());
    EXPECT_EQ(bf16["precision"], recipe);
    EXPECT_NE(bf16["device"].get<std::string>().find("bf16 GEMMs"), std::string::npos)
        << bf16.dump();
    double largest = 0;
    for (size_t i = 0; i < fp32["losses"].size(); ++i) {
      const double want = fp32["losses"][i].get<double>();
      const double got = bf16["losses"][i].get<double>();
      EXPECT_NEAR(got, want, 1e-2 * want) << recipe << ", step " << i;  // the GPU tests' bf16
      largest = std::max(largest, std::abs(got - want) / want);
    }
    EXPECT_GT(largest, 1e-6) << recipe << " losses equal to fp32's: was anything rounded?";
    for (const char* layout : layouts) {
      const nlohmann::json run = run_workload(layout, kSteps, flags);
      EXPECT_NE(run["device"].get<std::string>().find("bf16 GEMMs"), std::string::npos) << layout;
      expect_equivalent(bf16, run, std::string(layout) + " in " + recipe, tolerance);
    }
    one_rank[recipe] = bf16;
  }
  double apart = 0;
  for (size_t i = 0; i < fp32["losses"].size(); ++i) {
    apart = std::max(apart, std::abs(one_rank["bf16-mixed"]["losses"][i].get<double>() -
                                     one_rank["bf16-fp32grad"]["losses"][i].get<double>()));
  }
  EXPECT_GT(apart, 1e-6) << "bf16-mixed and bf16-fp32grad trained alike: are gradients bf16?";
}

TEST(Workload, MlpLossFalls) {
  CommandResult r = run_partrain("-q launch -n 1 --workload mlp --layers 4 --hidden 64 --lr 1e-2 "
                                 "--global-batch 8 --micro-batch 8 --steps 12 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto losses = nlohmann::json::parse(r.out)["losses"];
  EXPECT_LT(losses[11].get<double>(), 0.2 * losses[0].get<double>()) << losses.dump();
}

TEST(Workload, SyntheticLossFalls) {
  nlohmann::json run = run_workload("-n 1 --micro-batch 4", 20);
  const auto& losses = run["losses"];
  EXPECT_NEAR(losses[0].get<double>(), std::log(128.0), 0.2);  // starts near ln V
  EXPECT_LT(losses[19].get<double>(), losses[0].get<double>() - 0.5);
}

// The text summary's memory table has every category --json has, so its columns account for
// the total (workspace and other were left out: 2.00 MiB of columns beside a 2.04 MiB total).
TEST(Workload, SummaryMemoryTableHasEveryCategory) {
  CommandResult r = run_partrain(fmt::format("launch -n 1 {} --layers 2 --steps 1", kModel));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = r.out + r.err;
  for (const char* category :
       {"params", "grads", "optimizer", "activations", "comm", "workspace", "other"}) {
    EXPECT_NE(text.find(std::string(" ") + category + " "), std::string::npos) << category;
  }
  EXPECT_NE(text.find("(total: the peak of the sum"), std::string::npos) << text;
}

TEST(Workload, DdpBucketsOverlapBackward) {
  nlohmann::json run = run_workload("-n 2 --micro-batch 2", 4, "--bucket-mb 0.05", 8);
  EXPECT_GE(run["ddp"]["buckets"].get<int>(), 2);
  EXPECT_EQ(run["ddp"]["bucket_all_reduces"].get<int>(), 4 * run["ddp"]["buckets"].get<int>());
  EXPECT_GE(run["ddp"]["all_reduces_started_before_backward_end"].get<int>(), 1) << run.dump();
}

TEST(Workload, SummaryHasTheIssuesJsonShape) {
  nlohmann::json run = run_workload("-n 2 --micro-batch 2", 3);
  for (const char* key : {"losses", "final_params_l2", "tokens_per_s", "step_time_ms", "mfu",
                          "memory_peak_bytes"}) {
    EXPECT_TRUE(run.contains(key)) << key;
  }
  EXPECT_TRUE(run["step_time_ms"].contains("median"));
  EXPECT_TRUE(run["step_time_ms"].contains("p90"));
  for (const char* rank : {"0", "1"}) {
    const auto& m = run["memory_peak_bytes"][rank];
    for (const char* category : {"params", "grads", "optimizer", "activations", "comm",
                                 "workspace", "other", "total"}) {
      EXPECT_TRUE(m.contains(category)) << rank << " " << category;
    }
    // fp32 AdamW: 4 bytes of params, 4 of grads and 8 of optimizer states per parameter.
    EXPECT_EQ(m["grads"], m["params"]);
    EXPECT_EQ(m["optimizer"], 2 * m["params"].get<int64_t>());
  }
  EXPECT_GT(run["mfu"].get<double>(), 0.0);
  ASSERT_EQ(run["ranks"].size(), 2u);
  EXPECT_GT(run["ranks"][1]["step_time_ms"]["median"].get<double>(), 0.0);
}

TEST(Workload, TensorParallelShardsTheParameters) {
  nlohmann::json one = run_workload("-n 1 --micro-batch 4", 1);
  nlohmann::json tp = run_workload("-n 2 --tp 2 --micro-batch 4", 1);
  int64_t full = one["memory_peak_bytes"]["0"]["params"].get<int64_t>();
  int64_t shard = tp["memory_peak_bytes"]["0"]["params"].get<int64_t>();
  EXPECT_LT(shard, full);
  EXPECT_GT(shard, full / 2);  // layernorms, biases and wpe stay replicated
}

TEST(Workload, InvalidLayoutsAreRefusedBeforeAnyRankStarts) {
  struct Case {
    const char* args;
    const char* names;
  };
  for (const Case& c : {
           Case{"-n 3 --tp 3 --heads 4", "--tp 3 must divide the attention heads (4)"},
           Case{"-n 2 --sp", "--sp (sequence parallelism) needs --tp > 1"},
           Case{"-n 4 --dp 3", "product of the degrees"},
           Case{"-n 4 --pp 4 --layers 2", "--pp 4 is more than the model's 2 layers"},
           Case{"-n 2 --pp 2 --vpp 2", "needs --pp-schedule interleaved"},
           Case{"-n 2 --micro-batch 3 --global-batch 4",
                "is not a multiple of --dp x --micro-batch"},
           Case{"-n 2 --pp 2 --pp-schedule interleaved --vpp 2 --layers 4 --global-batch 3",
                "multiple of --pp 2"},
           Case{"-n 1 --hidden 60 --heads 8", "--hidden 60 is not divisible by --heads 8"},
           Case{"-n 2 --tp 2 --vocab 101 --heads 4", "--vocab 101 is not divisible by --tp 2"},
           Case{"-n 2 --pp 2 --layers 4 --pp-split 2,1", "adds up to 3 layers"},
           Case{"-n 2 --tp 2 --layers 3 --workload mlp", "even number of layers"},
           Case{"-n 1 --device cuda", "--device cuda"},
           Case{"-n 2 --comm nccl", "--comm nccl needs the CUDA device"},
           Case{"-n 1 --precision bf16-fp32grad-accum",
                "is not implemented; pass --precision bf16"},
           Case{"-n 1 --precision fp16",
                "is not fp32, bf16, fp32-adam, bf16-mixed or bf16-fp32grad"},
           Case{"-n 2 --device cpu-isolated --comm nccl", "pass --comm gloo"},
           Case{"-n 1 --pp-schedule zb-h1",
                "needs --pp > 1 (one stage has no bubble); use "
                "--pp-schedule 1f1b"},
           Case{"-n 2 --pp 2 --pp-schedule dualpipev --layers 4 --global-batch 2",
                "dualpipev needs at least 2 x --pp 2 = 4 micro-batches per step (got 2)"},
           Case{"-n 3 --pp 3 --pp-schedule dualpipev --layers 8 --global-batch 6",
                "2 x --pp 3 = 6 stages must divide the 8 layers, or give --pp-split with 6"},
           Case{"-n 2 --pp 2 --pp-schedule zb-h1 --layers 4 --zero 2",
                "--zero 2 reduce-scatters a unit's gradients when the backward releases it: use "
                "--zero 1 or --pp-schedule 1f1b"},
           Case{"-n 2 --pp 2 --pp-schedule dualpipe --layers 4 --global-batch 4",
                "use --pp-schedule dualpipev"},
       }) {
    const bool names_workload = std::string(c.args).find("--workload") != std::string::npos;
    CommandResult r = run_partrain(std::string(names_workload ? "launch " : "launch --workload gpt ") +
                                   c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("rendezvous on"), std::string::npos) << "a rank started: " << c.args;
  }
}

// The real `partrain worker`, handed a PARTRAIN_WORKLOAD_CONFIG with a misspelled precision or
// schedule (a fp23 run trained in fp32, a 1fb1 one in 1F1B), exits 2 naming the field before it
// starts anything.
TEST(Workload, AWorkerGivenAMisspelledConfigExitsNamingTheField) {
  runner::WorkloadConfig config;
  ASSERT_TRUE(runner::resolve_workload(config).is_ok());
  const nlohmann::json good = nlohmann::json::parse(runner::workload_to_json(config));
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"/precision", "fp23", "PARTRAIN_WORKLOAD_CONFIG: field 'precision' must be one of"},
      {"/layout/schedule", "1fb1", "PARTRAIN_WORKLOAD_CONFIG: field 'layout.schedule' must be one of"},
      {"/layout/precision", "bf16", "PARTRAIN_WORKLOAD_CONFIG: unknown field 'layout.precision'"},
  };
  for (const auto& [pointer, value, message] : cases) {
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(pointer)] = value;
    CommandResult r = run_partrain("worker", "PARTRAIN_WORKLOAD_CONFIG='" + bad.dump() + "'");
    EXPECT_EQ(r.exit_code, 2) << pointer << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << pointer << "\n" << r.err;
  }
}

// Every strategy on the isolated CPU device (memory the host cannot touch, as a GPU's; Gloo staged
// through host copies, as for several ranks on one GPU) trains exactly as on the CPU device: the
// workloads reach their tensors only through device calls, so they can run on the CUDA device.
class IsolatedDevice : public ::testing::TestWithParam<const char*> {};

TEST_P(IsolatedDevice, TrainsExactlyAsOnTheCpu) {
  auto run = [](const std::string& device) {
    std::string args = fmt::format("-q launch {} --steps 3 --json --device {}", GetParam(), device);
    CommandResult r = run_partrain(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  nlohmann::json cpu = run("cpu");
  nlohmann::json isolated = run("cpu-isolated");
  ASSERT_FALSE(cpu.is_discarded());
  ASSERT_FALSE(isolated.is_discarded());
  EXPECT_EQ(isolated["losses"], cpu["losses"]);
  EXPECT_EQ(isolated["final_params_l2"], cpu["final_params_l2"]);
  // The model states are the same bytes; the host-value collectives' staging is comm.
  for (const char* category : {"params", "grads", "optimizer", "activations"}) {
    EXPECT_EQ(isolated["memory_peak_bytes"]["0"][category], cpu["memory_peak_bytes"]["0"][category])
        << category;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, IsolatedDevice,
    ::testing::Values(
        "-n 1 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --micro-batch 2",
        "-n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --dp 2 --tp 2 --sp --micro-batch 1 --bucket-mb 0.05",
        "-n 2 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --zero 1 --micro-batch 2",
        "-n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --tp 2 --zero 2 --micro-batch 2",
        "-n 3 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 3 --zero 3 --micro-batch 1",
        "-n 4 --workload gpt --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --pp 2 --tp 2 --micro-batch 1",
        "-n 2 --workload gpt --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --pp 2 --pp-schedule interleaved --vpp 2 --micro-batch 1",
        "-n 4 --workload gpt --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --dp 2 --pp 2 --zero 3 --micro-batch 1",
        "-n 4 --workload mlp --layers 4 --hidden 64 --global-batch 4 --dp 2 --tp 2 "
        "--micro-batch 2",
        "-n 2 --workload mlp --layers 4 --hidden 64 --global-batch 4 --pp 2 --micro-batch 1 "
        "--recompute full",
        // bf16 parameters and activations: widened, rounded, gathered, written back and passed
        // between pipeline stages only through device calls.
        "-n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --dp 2 --zero 1 --tp 2 --micro-batch 1 --precision bf16-fp32grad",
        "-n 2 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --zero 2 --micro-batch 2 --precision bf16",
        "-n 3 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 3 --zero 3 --micro-batch 1 --precision bf16",
        "-n 4 --workload gpt --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--global-batch 4 --pp 2 --tp 2 --sp --micro-batch 1 --recompute selective "
        "--precision bf16",
        "-n 2 --workload mlp --layers 4 --hidden 64 --global-batch 4 --pp 2 --micro-batch 1 "
        "--recompute full --precision bf16-fp32grad"));

TEST(Workload, WorkloadAndCommandAreExclusive) {
  CommandResult r = run_partrain("launch -n 1 --workload gpt -- true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace partrain::testing
