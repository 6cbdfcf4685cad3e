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

}  // namespace
}  // namespace partrain::memory
