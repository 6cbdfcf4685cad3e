#include "runner/workload/workload_layout.h"

#include <gtest/gtest.h>

#include "runner/workload/workload_config.h"

namespace partrain::runner {
namespace {

WorkloadModel small_gpt() { return {4, 64, 4, 16, 128, 256}; }

// A gpt of `small_gpt()`'s size on `world` ranks, dp what the other degrees leave.
WorkloadConfig world_of(int world) {
  WorkloadConfig config;
  config.model = small_gpt();
  config.world = {world, false};
  return config;
}

StatusOr<ResolvedLayout> resolve(WorkloadConfig config) {
  RETURN_IF_ERROR(resolve_workload(config));
  return config.resolved;
}

void expect_rejected(const WorkloadConfig& config, const std::string& names) {
  auto resolved = resolve(config);
  ASSERT_FALSE(resolved.is_ok()) << "accepted a layout that breaks: " << names;
  EXPECT_EQ(resolved.status().exit_code(), 2);
  EXPECT_NE(resolved.status().message().find(names), std::string::npos)
      << resolved.status().message();
}

TEST(ResolveLayout, DefaultsFollowTheConventions) {
  WorkloadConfig config = world_of(8);
  config.layout.tp = 2;
  config.layout.micro_batch = 3;
  auto resolved = resolve(config);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->layout.dp, 4);  // world / (tp x pp)
  EXPECT_EQ(resolved->global_batch, 12);  // dp x micro-batch
  EXPECT_EQ(resolved->micro_batches, 1);
  EXPECT_EQ(resolved->layout.schedule, PipelineSchedule::kOneFOneB);
  EXPECT_EQ(resolved->chunk_layers, std::vector<int64_t>{4});
}

TEST(ResolveLayout, PipelineChunksAndUnevenSplits) {
  WorkloadConfig config = world_of(2);
  config.layout.pp = 2;
  config.layout.schedule = PipelineSchedule::kInterleaved;
  config.layout.vpp = 2;
  config.layout.global_batch = 4;
  auto resolved = resolve(config);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->chunk_layers, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(resolved->micro_batches, 4);

  WorkloadConfig uneven = world_of(2);
  uneven.layout.pp = 2;
  uneven.layout.pp_split = {3, 1};
  auto split = resolve(uneven);
  ASSERT_TRUE(split.is_ok()) << split.status().message();
  EXPECT_EQ(split->chunk_layers, (std::vector<int64_t>{3, 1}));
}

TEST(ResolveLayout, EachConstraintIsNamed) {
  WorkloadConfig tp3 = world_of(3);
  tp3.layout.tp = 3;
  expect_rejected(tp3, "--tp 3 must divide the attention heads (4)");

  WorkloadConfig product = world_of(4);
  product.layout.dp = 3;
  product.world.dp_given = true;
  expect_rejected(product, "product of the degrees");

  WorkloadConfig too_deep = world_of(8);
  too_deep.layout.pp = 8;
  expect_rejected(too_deep, "--pp 8 is more than the model's 4 layers");

  WorkloadConfig uneven = world_of(3);
  uneven.layout.pp = 3;
  expect_rejected(uneven, "--pp-split");

  WorkloadConfig interleaved = world_of(2);
  interleaved.layout.pp = 2;
  interleaved.layout.vpp = 2;
  interleaved.layout.schedule = PipelineSchedule::kInterleaved;
  interleaved.layout.global_batch = 3;
  expect_rejected(interleaved, "multiple of --pp 2");

  WorkloadConfig vpp_only = world_of(2);
  vpp_only.layout.pp = 2;
  vpp_only.layout.vpp = 2;
  expect_rejected(vpp_only, "needs --pp-schedule interleaved");

  WorkloadConfig batch = world_of(4);
  batch.layout.micro_batch = 2;
  batch.layout.global_batch = 6;
  expect_rejected(batch, "--global-batch 6 is not a multiple of --dp x --micro-batch");
  // 0 and -2 are multiples of anything: they must be refused before the divisibility check.
  for (int global : {0, -2}) {
    batch.layout.global_batch = global;
    expect_rejected(batch, "--global-batch must be at least 1");
  }

  WorkloadConfig sp = world_of(2);
  sp.layout.sp = true;
  expect_rejected(sp, "--sp (sequence parallelism) needs --tp > 1");

  WorkloadConfig split_sum = world_of(2);
  split_sum.layout.pp = 2;
  split_sum.layout.pp_split = {2, 1};
  expect_rejected(split_sum, "adds up to 3 layers");

  WorkloadConfig vocab = world_of(2);
  vocab.layout.tp = 2;
  vocab.model.vocab = 101;
  expect_rejected(vocab, "--vocab 101 is not divisible by --tp 2");

  WorkloadConfig zero = world_of(2);
  zero.layout.zero = 4;
  expect_rejected(zero, "--zero 4");
}

// What the workloads cannot run, though memory's rules allow it, is refused by the runner's own
// check: context parallelism (memory and recommend model it) and MLP stages of odd layers.
TEST(CheckRunnable, RefusesWhatTheWorkloadsCannotRun) {
  WorkloadConfig cp = world_of(2);
  cp.layout.cp = 2;
  expect_rejected(cp, "run no context parallelism");
  // ep on a dense model is refused by the rule every layout follows.
  WorkloadConfig ep = world_of(2);
  ep.layout.ep = 2;
  expect_rejected(ep, "2 shards a mixture of experts' experts: model 'builtin-gpt' has none");
  WorkloadConfig mlp = world_of(2);
  mlp.kind = WorkloadKind::kMlp;
  mlp.model.layers = 3;
  mlp.layout.tp = 2;
  expect_rejected(mlp, "even number of layers");
}

TEST(ApplyStrategy, ShorthandsSetTheDegrees) {
  TrainingLayout layout;
  ASSERT_TRUE(apply_strategy("fsdp", {}, 4, layout).is_ok());
  EXPECT_EQ(layout.zero, 3);
  ASSERT_TRUE(apply_strategy("sp", {}, 4, layout).is_ok());
  EXPECT_EQ(layout.tp, 4);
  EXPECT_TRUE(layout.sp);
  TrainingLayout pp;
  ASSERT_TRUE(apply_strategy("pp", {}, 4, pp).is_ok());
  EXPECT_EQ(pp.pp, 4);
  EXPECT_FALSE(apply_strategy("zero4", {}, 4, pp).is_ok());
}

// A degree given beside the shorthand that contradicts it is refused, not overridden; one that
// agrees with it is fine.
TEST(ApplyStrategy, ContradictingDegreesAreRefused) {
  TrainingLayout fsdp;
  Status refused = apply_strategy("fsdp", {.zero = 1}, 2, fsdp);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(),
            "--strategy fsdp means --zero 3, but --zero 1 was given: pass one of them");
  TrainingLayout ddp;
  EXPECT_FALSE(apply_strategy("ddp", {.zero = 3}, 2, ddp).is_ok());
  TrainingLayout tp;
  EXPECT_FALSE(apply_strategy("tp", {.tp = 2}, 4, tp).is_ok());
  // Also a degree given at its default: `--strategy tp --tp 1` ran tp 2 without a word.
  TrainingLayout tp_one;
  refused = apply_strategy("tp", {.tp = 1}, 2, tp_one);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(),
            "--strategy tp means --tp 2, but --tp 1 was given: pass one of them");
  TrainingLayout pp_one;
  EXPECT_FALSE(apply_strategy("pp", {.pp = 1}, 2, pp_one).is_ok());
  TrainingLayout zero_none;
  EXPECT_FALSE(apply_strategy("zero1", {.zero = 0}, 2, zero_none).is_ok());
  TrainingLayout agreeing;
  EXPECT_TRUE(apply_strategy("pp", {.pp = 4}, 4, agreeing).is_ok());
  EXPECT_EQ(agreeing.pp, 4);
}

}  // namespace
}  // namespace partrain::runner
