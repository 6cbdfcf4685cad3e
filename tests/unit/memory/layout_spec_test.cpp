#include "memory/layout_spec.h"

#include <gtest/gtest.h>

namespace partrain::memory {
namespace {

StatusOr<LayoutSpec> parse(std::string_view text) { return parse_layout_spec(text, {}, "--check"); }

TEST(LayoutSpec, EveryKeySetsItsField) {
  auto spec = parse(
      "dp=8,tp=4,pp=2,cp=2,vpp=3,zero=1,shard=4,mb=2,recompute=selective,sp=1,"
      "schedule=interleaved,pp_split=1/2/3/4/5/6");
  ASSERT_TRUE(spec.is_ok()) << spec.status().message();
  const TrainingLayout& l = spec->layout;
  EXPECT_TRUE(spec->dp_given);
  EXPECT_EQ(l.dp, 8);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.pp, 2);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.vpp, 3);
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.shard, 4);
  EXPECT_EQ(l.micro_batch, 2);
  EXPECT_EQ(l.recompute, Recompute::kSelective);
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(l.pp_split, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

// What the spec leaves out is the base's; dp left out is for the world to fill; vpp above 1
// without a schedule means the interleaved one.
TEST(LayoutSpec, KeysLeftOutKeepTheBase) {
  TrainingLayout base;
  base.global_batch = 64;
  base.micro_batch = 4;
  auto spec = parse_layout_spec("pp=4,vpp=2,micro_batch=1", base, "--check");
  ASSERT_TRUE(spec.is_ok()) << spec.status().message();
  EXPECT_FALSE(spec->dp_given);
  EXPECT_EQ(spec->layout.global_batch, 64);
  EXPECT_EQ(spec->layout.micro_batch, 1);
  EXPECT_EQ(spec->layout.schedule, PipelineSchedule::kInterleaved);
  auto gpipe = parse("pp=2,vpp=2,schedule=gpipe");
  ASSERT_TRUE(gpipe.is_ok());
  EXPECT_EQ(gpipe->layout.schedule, PipelineSchedule::kGpipe);  // resolve_layout refuses it
}

TEST(LayoutSpec, MalformedTextNamesTheItem) {
  const std::pair<const char*, const char*> cases[] = {
      {"tp",
       "--check 'tp': 'tp' is not KEY=VALUE (keys: dp tp pp cp vpp ep zero shard mb recompute sp "
       "schedule pp_split)"},
      {"tp=2,tp=4", "--check 'tp=2,tp=4': tp is given twice; give each key once"},
      {"mb=2,micro_batch=4", "--check 'mb=2,micro_batch=4': micro_batch is given twice"},
      {"tensor=2", "--check: unknown key 'tensor'"},
      {"tp=two", "--check: tp=two is not a non-negative integer"},
      {"tp=-1", "--check: tp=-1 is not a non-negative integer"},
      {"shard=-8", "--check: shard=-8 is not a non-negative integer"},
      {"zero=99999999999", "--check: zero=99999999999 is not a non-negative integer"},
      {"sp=2", "--check: sp=2 is 0 (off) or 1 (on)"},
      {"recompute=most", "--check: recompute=most (none, selective or full)"},
      {"schedule=zb",
       "--check: schedule=zb (gpipe, 1f1b, interleaved, zb-h1, dualpipev or dualpipe)"},
      {"pp_split=16/x", "--check: pp_split=16/x is not layers per stage"},
      {"pp_split=16//16", "--check: pp_split=16//16 is not layers per stage"},
  };
  for (const auto& [text, message] : cases) {
    auto spec = parse(text);
    ASSERT_FALSE(spec.is_ok()) << text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message().rfind(message, 0), 0u) << text << ": " << spec.status().message();
  }
}

// A value of the right kind that breaks a rule is resolve_layout's to refuse, in the spec's keys.
TEST(LayoutSpec, RulesAreTheResolvesInTheSpecsKeys) {
  auto spec = parse("tp=0,zero=7");
  ASSERT_TRUE(spec.is_ok()) << spec.status().message();
  ModelConfig model = gpt_model(4, 64, 4, 128, 32);
  const LayoutNames keys{.naming = LayoutNaming::kSpecKeys};
  EXPECT_EQ(resolve_layout(spec->layout, model, keys).status().message(),
            "tp must be at least 1 (got 0)");
  spec->layout.tp = 1;
  EXPECT_EQ(resolve_layout(spec->layout, model, keys).status().message().rfind(
                "zero=7 is not 0, 1, 2 or 3", 0),
            0u);
}

}  // namespace
}  // namespace partrain::memory
