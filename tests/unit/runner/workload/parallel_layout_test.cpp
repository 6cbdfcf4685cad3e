#include "runner/workload/parallel_layout.h"

#include <gtest/gtest.h>

namespace partrain::runner {
namespace {

LayoutModel small_gpt() { return {4, 64, 4, 16, 128, 256}; }

ParallelLayout world_of(int world) {
  ParallelLayout layout;
  layout.world = world;
  return layout;
}

void expect_rejected(const ParallelLayout& layout, const LayoutModel& model,
                     const std::string& names) {
  auto resolved = resolve_layout(layout, model);
  ASSERT_FALSE(resolved.is_ok()) << "accepted a layout that breaks: " << names;
  EXPECT_EQ(resolved.status().exit_code(), 2);
  EXPECT_NE(resolved.status().message().find(names), std::string::npos)
      << resolved.status().message();
}

TEST(ResolveLayout, DefaultsFollowTheConventions) {
  ParallelLayout layout = world_of(8);
  layout.tp = 2;
  layout.micro_batch = 3;
  auto resolved = resolve_layout(layout, small_gpt());
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->dp, 4);  // world / (tp x pp)
  EXPECT_EQ(resolved->global_batch, 12);  // dp x micro-batch
  EXPECT_EQ(resolved->micro_batches, 1);
  EXPECT_EQ(resolved->schedule, PipelineSchedule::kOneFOneB);
  EXPECT_EQ(resolved->stage_layers, std::vector<int>{4});
}

TEST(ResolveLayout, PipelineChunksAndUnevenSplits) {
  ParallelLayout layout = world_of(2);
  layout.pp = 2;
  layout.schedule = PipelineSchedule::kInterleaved;
  layout.vpp = 2;
  layout.global_batch = 4;
  auto resolved = resolve_layout(layout, small_gpt());
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->stage_layers, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(resolved->micro_batches, 4);

  ParallelLayout uneven = world_of(2);
  uneven.pp = 2;
  uneven.pp_split = {3, 1};
  auto split = resolve_layout(uneven, small_gpt());
  ASSERT_TRUE(split.is_ok()) << split.status().message();
  EXPECT_EQ(split->stage_layers, (std::vector<int>{3, 1}));
}

TEST(ResolveLayout, EachConstraintIsNamed) {
  ParallelLayout tp3 = world_of(3);
  tp3.tp = 3;
  expect_rejected(tp3, small_gpt(), "--heads 4 is not divisible by --tp 3");

  ParallelLayout product = world_of(4);
  product.dp = 3;
  expect_rejected(product, small_gpt(), "product of the degrees");

  ParallelLayout too_deep = world_of(8);
  too_deep.pp = 8;
  expect_rejected(too_deep, small_gpt(), "fewer than pp x vpp");

  ParallelLayout uneven = world_of(3);
  uneven.pp = 3;
  expect_rejected(uneven, small_gpt(), "--pp-split");

  ParallelLayout interleaved = world_of(2);
  interleaved.pp = 2;
  interleaved.vpp = 2;
  interleaved.schedule = PipelineSchedule::kInterleaved;
  interleaved.global_batch = 3;
  expect_rejected(interleaved, small_gpt(), "multiple of --pp 2");

  ParallelLayout vpp_only = world_of(2);
  vpp_only.pp = 2;
  vpp_only.vpp = 2;
  expect_rejected(vpp_only, small_gpt(), "needs --pp-schedule interleaved");

  ParallelLayout batch = world_of(4);
  batch.micro_batch = 2;
  batch.global_batch = 6;
  expect_rejected(batch, small_gpt(), "--global-batch 6 is not a multiple of dp x micro-batch");
  // 0 and -2 are multiples of anything: they must be refused before the divisibility check.
  for (int global : {0, -2}) {
    batch.global_batch = global;
    expect_rejected(batch, small_gpt(), "--global-batch must be at least 1");
  }

  ParallelLayout sp = world_of(2);
  sp.sp = true;
  expect_rejected(sp, small_gpt(), "--sp (sequence parallelism) needs tensor parallelism");

  ParallelLayout split_sum = world_of(2);
  split_sum.pp = 2;
  split_sum.pp_split = {2, 1};
  expect_rejected(split_sum, small_gpt(), "sums to 3 layers");

  ParallelLayout vocab = world_of(2);
  vocab.tp = 2;
  LayoutModel odd_vocab = small_gpt();
  odd_vocab.vocab = 101;
  expect_rejected(vocab, odd_vocab, "--vocab 101 is not divisible by --tp 2");

  ParallelLayout zero = world_of(2);
  zero.zero = 4;
  expect_rejected(zero, small_gpt(), "--zero 4");
}

TEST(ApplyStrategy, ShorthandsSetTheDegrees) {
  ParallelLayout layout = world_of(4);
  ASSERT_TRUE(apply_strategy("fsdp", {}, layout).is_ok());
  EXPECT_EQ(layout.zero, 3);
  ASSERT_TRUE(apply_strategy("sp", {}, layout).is_ok());
  EXPECT_EQ(layout.tp, 4);
  EXPECT_TRUE(layout.sp);
  ParallelLayout pp = world_of(4);
  ASSERT_TRUE(apply_strategy("pp", {}, pp).is_ok());
  EXPECT_EQ(pp.pp, 4);
  EXPECT_FALSE(apply_strategy("zero4", {}, pp).is_ok());
}

// A degree given beside the shorthand that contradicts it is refused, not overridden; one that
// agrees with it is fine.
TEST(ApplyStrategy, ContradictingDegreesAreRefused) {
  ParallelLayout fsdp = world_of(2);
  Status refused = apply_strategy("fsdp", {.zero = 1}, fsdp);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(),
            "--strategy fsdp means --zero 3, but --zero 1 was given: pass one of them");
  ParallelLayout ddp = world_of(2);
  EXPECT_FALSE(apply_strategy("ddp", {.zero = 3}, ddp).is_ok());
  ParallelLayout tp = world_of(4);
  EXPECT_FALSE(apply_strategy("tp", {.tp = 2}, tp).is_ok());
  // Also a degree given at its default: `--strategy tp --tp 1` ran tp 2 without a word.
  ParallelLayout tp_one = world_of(2);
  refused = apply_strategy("tp", {.tp = 1}, tp_one);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(),
            "--strategy tp means --tp 2, but --tp 1 was given: pass one of them");
  ParallelLayout pp_one = world_of(2);
  EXPECT_FALSE(apply_strategy("pp", {.pp = 1}, pp_one).is_ok());
  ParallelLayout zero_none = world_of(2);
  EXPECT_FALSE(apply_strategy("zero1", {.zero = 0}, zero_none).is_ok());
  ParallelLayout agreeing = world_of(4);
  EXPECT_TRUE(apply_strategy("pp", {.pp = 4}, agreeing).is_ok());
  EXPECT_EQ(agreeing.pp, 4);
}

}  // namespace
}  // namespace partrain::runner
