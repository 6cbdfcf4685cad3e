#include "memory/training_layout.h"

#include <gtest/gtest.h>

#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

Status check(const TrainingLayout& layout, const ModelConfig& model = testing::llama2_7b()) {
  return resolve_layout(layout, model).status();
}

TEST(TrainingLayout, Defaults) {
  auto r = resolve_layout(TrainingLayout{}, testing::llama2_7b());
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->global_batch, 1);
  EXPECT_EQ(r->micro_batches, 1);
  EXPECT_EQ(r->seq, 4096);
  EXPECT_EQ(r->stage_layers, std::vector<int64_t>{32});
  TrainingLayout dp8;
  dp8.dp = 8;
  dp8.micro_batch = 2;
  EXPECT_EQ(resolve_layout(dp8, testing::llama2_7b())->global_batch, 16);  // dp x micro-batch
}

TEST(TrainingLayout, InvalidLayoutsNameTheConstraint) {
  TrainingLayout l;
  l.tp = 3;
  EXPECT_NE(check(l).message().find("must divide the attention heads"), std::string::npos);
  l = {};
  l.tp = 16;  // Llama 3 8B has 8 KV heads
  EXPECT_NE(check(l, testing::llama3_8b()).message().find("KV heads"), std::string::npos);
  l = {};
  l.pp = 64;
  EXPECT_NE(check(l).message().find("more than the model's 32 layers"), std::string::npos);
  l = {};
  l.sp = true;
  EXPECT_NE(check(l).message().find("needs --tp > 1"), std::string::npos);
  l = {};
  l.dp = 4;
  l.global_batch = 6;
  EXPECT_NE(check(l).message().find("multiple of --dp x --micro-batch"), std::string::npos);
  l = {};
  l.pp = 3;
  EXPECT_NE(check(l).message().find("must divide the 32 layers"), std::string::npos);
  l = {};
  l.vpp = 2;
  EXPECT_NE(check(l).message().find("needs --pp-schedule interleaved"), std::string::npos);
  l = {};
  l.cp = 3;
  EXPECT_NE(check(l).message().find("--cp 3 must divide the sequence"), std::string::npos);
  EXPECT_EQ(check(l).code(), StatusCode::kInvalidArgument);
}

// A hybrid (HSDP): ZeRO's shard groups must tile the data ranks and ZeRO must shard something.
TEST(TrainingLayout, HybridShardGroupsTileTheDataRanks) {
  TrainingLayout l;
  l.dp = 16;
  l.zero = 3;
  l.shard = 8;
  ASSERT_TRUE(check(l).is_ok()) << check(l).message();
  EXPECT_EQ(zero_shard_ranks(l), 8);
  EXPECT_EQ(zero_replicas(l), 2);
  l.shard = 0;  // every data rank
  EXPECT_EQ(zero_shard_ranks(l), 16);
  EXPECT_EQ(zero_replicas(l), 1);
  l.cp = 2;  // the shard groups are drawn from dp x cp
  l.shard = 32;
  EXPECT_TRUE(check(l).is_ok()) << check(l).message();
  EXPECT_EQ(zero_replicas(l), 1);
  l.cp = 1;
  l.shard = 6;
  const Status uneven = check(l);
  EXPECT_EQ(uneven.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(uneven.message().find("--shard 6 must divide --dp 16"), std::string::npos)
      << uneven.message();
  EXPECT_NE(uneven.message().find("try --shard 2"), std::string::npos) << uneven.message();
  l.shard = 8;
  l.zero = 0;
  EXPECT_NE(check(l).message().find("--zero 0 shards nothing"), std::string::npos)
      << check(l).message();
}

TEST(TrainingLayout, UnevenSplit) {
  TrainingLayout l;
  l.pp = 3;
  l.pp_split = {12, 10, 10};
  auto r = resolve_layout(l, testing::llama2_7b());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->stage_layers, (std::vector<int64_t>{12, 10, 10}));
  l.pp_split = {12, 10, 9};
  EXPECT_NE(check(l).message().find("adds up to 31 layers"), std::string::npos);
  l.pp_split = {16, 16};
  EXPECT_NE(check(l).message().find("one per stage"), std::string::npos);
}

// Narayanan 2021 sec. 2.2.2: chunk c of the interleaved schedule runs on rank c mod p.
TEST(TrainingLayout, InterleavedChunks) {
  TrainingLayout l;
  l.pp = 4;
  l.vpp = 2;
  l.schedule = PipelineSchedule::kInterleaved;
  l.global_batch = 8;
  auto r = resolve_layout(l, testing::llama2_7b());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->chunk_layers.size(), 8u);
  EXPECT_EQ(r->stage_layers, (std::vector<int64_t>{8, 8, 8, 8}));
  l.global_batch = 6;  // 6 micro-batches: not a multiple of p = 4
  EXPECT_NE(check(l).message().find("multiple of --pp 4"), std::string::npos);
}

// One rule, said as the user wrote the layout: a command's flag, a layout spec's key, a config's
// field. The spec names a field it has no key for (the global batch) by its flag.
TEST(TrainingLayout, EachRuleNamesTheFieldAsTheUserWroteIt) {
  TrainingLayout l;
  l.pp = 3;
  const std::pair<LayoutNaming, const char*> namings[] = {
      {LayoutNaming::kFlags, "--pp 3 x --vpp 1 = 3 chunks must divide the 32 layers, or give --pp-split"},
      {LayoutNaming::kSpecKeys, "pp=3 x vpp=1 = 3 chunks must divide the 32 layers, or give pp_split"},
      {LayoutNaming::kConfigFields,
       "layout.pp=3 x layout.vpp=1 = 3 chunks must divide the 32 layers, or give layout.pp_split"},
  };
  for (const auto& [naming, message] : namings) {
    EXPECT_EQ(resolve_layout(l, testing::llama2_7b(), {.naming = naming}).status().message(),
              message);
  }
  l = {};
  l.dp = 4;
  l.micro_batch = 2;
  l.global_batch = 12;
  EXPECT_EQ(resolve_layout(l, testing::llama2_7b(), {.naming = LayoutNaming::kSpecKeys})
                .status()
                .message(),
            "--global-batch 12 is not a multiple of dp x mb = 4 x 2 = 8: every data-parallel rank "
            "runs whole micro-batches");
  l = {};
  l.zero = 4;
  EXPECT_EQ(check(l).message().rfind("--zero 4 is not 0, 1, 2 or 3", 0), 0u) << check(l).message();
}

// On a world, dp is what tp x pp x cp leave of it unless given, and the degrees must fill it.
TEST(TrainingLayout, TheDegreesFillTheWorld) {
  TrainingLayout l;
  l.tp = 2;
  l.pp = 2;
  auto r = resolve_layout(l, testing::llama2_7b(), {}, LayoutWorld{16, false});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->layout.dp, 4);
  EXPECT_EQ(layout_ranks(r->layout), 16);
  const LayoutNames gpus{.naming = LayoutNaming::kSpecKeys, .world = "--gpus", .world_unit = "GPUs"};
  l.tp = 3;
  EXPECT_EQ(resolve_layout(l, testing::gpt3_175b(), gpus, LayoutWorld{16, false}).status().message(),
            "tp x pp x cp = 3 x 2 x 1 = 6 does not divide --gpus 16: every data-parallel replica "
            "needs the same 6 GPUs");
  l.tp = 2;
  l.dp = 3;
  EXPECT_EQ(resolve_layout(l, testing::llama2_7b(), gpus, LayoutWorld{16, true}).status().message(),
            "dp x tp x pp x cp = 3 x 2 x 2 x 1 = 12 is not --gpus 16: the product of the degrees "
            "must be the number of GPUs");
  // A degree a command does not offer is left out of its products.
  const LayoutNames launch{.not_offered = {LayoutField::kCp}};
  EXPECT_EQ(resolve_layout(l, testing::llama2_7b(), launch, LayoutWorld{16, true}).status().message(),
            "--dp x --tp x --pp = 3 x 2 x 2 = 12 is not the world size 16: the product of the "
            "degrees must be the number of ranks");
}

// A schedule that cannot run with the layout is refused naming the constraint and the fix.
TEST(TrainingLayout, ZeroBubbleSchedulesNameWhatTheyNeed) {
  auto message = [](PipelineSchedule schedule, int pp, int64_t global_batch,
                    std::vector<int64_t> split = {}) {
    TrainingLayout l;
    l.schedule = schedule;
    l.pp = pp;
    l.global_batch = global_batch;
    l.pp_split = std::move(split);
    return check(l).message();
  };
  EXPECT_NE(message(PipelineSchedule::kZbH1, 1, 8).find("needs --pp > 1"), std::string::npos);
  EXPECT_NE(message(PipelineSchedule::kDualPipe, 3, 12).find("--pp 3 must be even"),
            std::string::npos);
  EXPECT_NE(message(PipelineSchedule::kDualPipeV, 4, 7)
                .find("at least 2 x --pp 4 = 8 "
                      "micro-batches"),
            std::string::npos);
  EXPECT_NE(message(PipelineSchedule::kDualPipe, 4, 9).find("must be even"), std::string::npos);
  // Llama 2 7B's 32 layers over dualpipev's 2 x 3 stages: give a split of 6 entries.
  EXPECT_NE(message(PipelineSchedule::kDualPipeV, 3, 6)
                .find("2 x --pp 3 = 6 stages must divide "
                      "the 32 layers"),
            std::string::npos);
  EXPECT_EQ(message(PipelineSchedule::kDualPipeV, 3, 6, {6, 5, 5, 5, 5, 6}), "");
  EXPECT_EQ(message(PipelineSchedule::kZbH1, 4, 8), "");
}

TEST(TrainingLayout, DualPipeVRanksHoldBothEndsOfTheirV) {
  TrainingLayout l;
  l.schedule = PipelineSchedule::kDualPipeV;
  l.pp = 4;
  l.global_batch = 8;
  l.pp_split = {1, 2, 3, 4, 5, 6, 7, 4};
  auto r = resolve_layout(l, testing::llama2_7b());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->chunk_layers.size(), 8u);
  EXPECT_EQ(r->stage_layers, (std::vector<int64_t>{1 + 4, 2 + 7, 3 + 6, 4 + 5}));
}

TEST(TrainingLayout, ScheduleNamesRoundTrip) {
  for (PipelineSchedule s : kPipelineSchedules) EXPECT_EQ(parse_schedule(schedule_name(s)), s);
  EXPECT_EQ(schedule_choices(), "gpipe, 1f1b, interleaved, zb-h1, dualpipev or dualpipe");
  EXPECT_FALSE(parse_schedule("zb").has_value());
}

}  // namespace
}  // namespace partrain::memory
