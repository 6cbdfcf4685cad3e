// The recommender's search: what it enumerates, what it rejects and why, the ranking, and the
// families explain compares against.
#include "analyzers/layout_search.h"

#include <gtest/gtest.h>

#include <set>

namespace partrain::analyzers {
namespace {

class LayoutSearchTest : public ::testing::Test {
 protected:
  LayoutSearchTest() : base_(base_input()), cost_(cost_model(base_)) {}

  static memory::EstimateInput base_input() {
    memory::EstimateInput in;
    in.model = memory::gpt_model(24, 2048, 16, 50257, 2048);
    in.recipe = *memory::precision_recipe("bf16-mixed", memory::Optimizer::kAdamW);
    in.capacity_bytes = 80e9;
    in.layout.global_batch = 64;
    return in;
  }
  static CostModel cost_model(const memory::EstimateInput& in) {
    Machines m;
    m.gpus = 16;
    m.gpus_per_node = 8;
    m.intra_node = {300e9, 2e-6};
    m.inter_node = {25e9, 8e-6};
    return {in.model, in.recipe, CollectiveCost(m), {500e12, 0.7, 2e12, 4e-6, 1}, 2e12, true, 25e6};
  }

  memory::EstimateInput base_;
  CostModel cost_;
  SearchSpace space_{16, 8, 4, 4, false};
};

TEST_F(LayoutSearchTest, RanksFittingLayoutsByThroughputAndEveryOneMultipliesToTheGpus) {
  const SearchResult r = search_layouts(cost_, base_, space_);
  ASSERT_GT(r.ranked.size(), 10u);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Candidate& c = r.ranked[i];
    const auto& l = c.layout;
    EXPECT_EQ(l.dp * l.tp * l.pp * l.cp, 16) << layout_label(l);
    EXPECT_TRUE(c.fits);
    EXPECT_LE(c.heaviest.total(), 80e9);
    EXPECT_EQ(64 % (l.dp * l.micro_batch), 0);
    EXPECT_FALSE(c.discouraged) << layout_label(l);
    if (i > 0) {
      EXPECT_GE(r.ranked[i - 1].cost.tokens_per_s, c.cost.tokens_per_s);
    }
  }
  EXPECT_GT(r.rejected.at(kRejectDiscouraged), 0);
  // A 1.3B model fits 80 GB in every layout that divides.
  EXPECT_EQ(r.costed, static_cast<int64_t>(r.ranked.size()));
  EXPECT_FALSE(r.rejected.contains(kRejectFit));
}

TEST_F(LayoutSearchTest, SmallGpusRejectWhatDoesNotFitAndReportTheLeastMemory) {
  base_.capacity_bytes = 20e9;
  const SearchResult r = search_layouts(cost_, base_, space_);
  EXPECT_GT(r.rejected.at(kRejectFit), 0);
  ASSERT_TRUE(r.least_memory);
  for (const Candidate& c : r.ranked) EXPECT_LE(c.heaviest.total(), 20e9);
  base_.capacity_bytes = 1e9;  // nothing fits a 1 GB GPU
  const SearchResult none = search_layouts(cost_, base_, space_);
  EXPECT_TRUE(none.ranked.empty());
  ASSERT_TRUE(none.least_memory);
  EXPECT_FALSE(none.least_memory->fits);
  EXPECT_GT(none.least_memory->heaviest.total(), 1e9);
}

TEST_F(LayoutSearchTest, DiscouragedZeroWithPipelineOnlyWhenAsked) {
  space_.include_discouraged = true;
  const SearchResult r = search_layouts(cost_, base_, space_);
  EXPECT_FALSE(r.rejected.contains(kRejectDiscouraged));
  bool seen = false;
  for (const Candidate& c : r.ranked) seen |= c.discouraged;
  EXPECT_TRUE(seen);
}

TEST_F(LayoutSearchTest, StructuralRejectionsNameTheirReason) {
  base_.model = memory::gpt_model(6, 1536, 12, 50257, 2048);  // 12 heads, 6 layers
  cost_.model = base_.model;
  const SearchResult r = search_layouts(cost_, base_, space_);
  EXPECT_GT(r.rejected.at(kRejectTpHeads), 0);   // tp 8, 16 do not divide 12 heads
  EXPECT_GT(r.rejected.at(kRejectPpLayers), 0);  // pp 4, 8, 16 do not divide 6 layers
  for (const Candidate& c : r.ranked) {
    EXPECT_EQ(12 % c.layout.tp, 0);
    EXPECT_EQ(6 % c.layout.pp, 0);
  }
}

// Variants that change nothing are not ranked as ties of the real ones: ZeRO without dp or cp
// (it shards over both), and selective recompute of a model without attention.
TEST_F(LayoutSearchTest, NoOpVariantsAreLeftOutAndCounted) {
  const SearchResult r = search_layouts(cost_, base_, space_);
  EXPECT_GT(r.rejected.at(kRejectZeroWithoutDp), 0);
  bool zero_over_cp_alone = false;
  for (const Candidate& c : r.ranked) {
    if (c.layout.dp * c.layout.cp == 1) EXPECT_EQ(c.layout.zero, 0) << layout_label(c.layout);
    zero_over_cp_alone |= c.layout.dp == 1 && c.layout.cp > 1 && c.layout.zero > 0;
  }
  EXPECT_TRUE(zero_over_cp_alone);
  memory::ModelConfig deep_mlp;  // the built-in MLP: 4 layers of 256, one row a sample
  deep_mlp.architecture = memory::Architecture::kMlp;
  deep_mlp.layers = 4;
  deep_mlp.hidden = 256;
  base_.model = deep_mlp;
  base_.layout.seq = 1;
  cost_.model = base_.model;
  const SearchResult mlp = search_layouts(cost_, base_, space_);
  ASSERT_FALSE(mlp.ranked.empty());
  EXPECT_GT(mlp.rejected.at(kRejectNoAttention), 0);
  for (const Candidate& c : mlp.ranked) {
    EXPECT_NE(c.layout.recompute, memory::Recompute::kSelective) << layout_label(c.layout);
  }
}

TEST_F(LayoutSearchTest, FilterHoldsAFamilyFixed) {
  const SearchResult fsdp = search_layouts(cost_, base_, space_, {1, 1, 1, 3});
  ASSERT_FALSE(fsdp.ranked.empty());
  std::set<int> micro_batches;
  for (const Candidate& c : fsdp.ranked) {
    EXPECT_EQ(c.layout.dp, 16);
    EXPECT_EQ(c.layout.zero, 3);
    micro_batches.insert(static_cast<int>(c.layout.micro_batch));
  }
  EXPECT_EQ(micro_batches, (std::set<int>{1, 2, 4}));  // 64 / 16 = 4 per rank
}

TEST_F(LayoutSearchTest, EvaluateCostsALayoutThatDoesNotFitAndRefusesOneThatDoesNotResolve) {
  memory::EstimateInput in = base_;
  in.capacity_bytes = 10e9;
  in.layout.dp = 16;
  in.layout.micro_batch = 4;
  auto c = evaluate_layout(cost_, in);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_FALSE(c->fits);
  EXPECT_GT(c->cost.step_s, 0);
  in.layout.tp = 3;  // does not divide 16 heads
  EXPECT_EQ(evaluate_layout(cost_, in).status().code(), StatusCode::kInvalidArgument);
}

TEST(LayoutLabel, NamesEveryDegreeThatIsSet) {
  memory::TrainingLayout l;
  l.dp = 8, l.tp = 4, l.pp = 2, l.vpp = 2, l.cp = 2, l.zero = 1, l.micro_batch = 2, l.sp = true;
  l.recompute = memory::Recompute::kSelective;
  EXPECT_EQ(layout_label(l), "dp8 tp4 pp2 vpp2 cp2 mb2 z1 rc=selective sp");
  EXPECT_EQ(layout_label(memory::TrainingLayout{}), "dp1 tp1 pp1 mb1 z0");
  l.vpp = 1;
  l.schedule = memory::PipelineSchedule::kZbH1;
  EXPECT_EQ(layout_label(l), "dp8 tp4 pp2 cp2 zb-h1 mb2 z1 rc=selective sp");
  l.shard = 4;  // of dp x cp = 16: a hybrid of 4 replicas
  EXPECT_EQ(layout_label(l), "dp8 tp4 pp2 cp2 zb-h1 mb2 z1 shard4 rc=selective sp");
  l.shard = 16;  // every data rank: the plain ZeRO-1
  EXPECT_EQ(layout_label(l), "dp8 tp4 pp2 cp2 zb-h1 mb2 z1 rc=selective sp");
}

// Data ranks that span nodes are also sharded a node's worth at a time (HSDP): 16 GPUs of 8 a
// node try shard groups of 8 at tp 1, 4 at tp 2 and 2 at tp 4, none at tp 8 (one data rank a
// node) nor where the data ranks fit a node (tp 1 pp 2: dp 8), and never with ZeRO-0. Over the NIC
// the hybrid's collectives are cheaper than full sharding's.
// --fix shard=8 keeps only those, ZeRO-0 left out.
TEST_F(LayoutSearchTest, HybridsShardWithinANodeWhenTheDataRanksSpanNodes) {
  const SearchResult r = search_layouts(cost_, base_, space_);
  std::set<std::pair<int, int>> hybrids;  // (tp, shard)
  const Candidate* full = nullptr;
  const Candidate* hybrid = nullptr;
  for (const Candidate& c : r.ranked) {
    const memory::TrainingLayout& l = c.layout;
    if (l.shard == 0) {
      if (l.dp == 16 && l.zero == 3 && l.micro_batch == 1 &&
          l.recompute == memory::Recompute::kNone)
        full = &c;
      continue;
    }
    EXPECT_GT(l.zero, 0) << layout_label(l);
    EXPECT_LT(l.shard, l.dp * l.cp) << layout_label(l);
    EXPECT_EQ(l.shard * l.tp, 8) << layout_label(l);
    EXPECT_EQ(l.dp * l.cp * l.tp, 16) << layout_label(l);  // pp 1: the data ranks span 2 nodes
    hybrids.insert({l.tp, l.shard});
    if (l.dp == 16 && l.zero == 3 && l.micro_batch == 1 && l.recompute == memory::Recompute::kNone)
      hybrid = &c;
  }
  EXPECT_EQ(hybrids, (std::set<std::pair<int, int>>{{1, 8}, {2, 4}, {4, 2}}));
  ASSERT_NE(full, nullptr);
  ASSERT_NE(hybrid, nullptr);
  EXPECT_LT(hybrid->cost.dp_comm_s, full->cost.dp_comm_s);
  EXPECT_GT(hybrid->heaviest.optimizer, full->heaviest.optimizer);

  SearchSpace space = space_;
  space.fixed_shard = 8;
  const SearchResult fixed = search_layouts(cost_, base_, space);
  ASSERT_FALSE(fixed.ranked.empty());
  for (const Candidate& c : fixed.ranked) {
    EXPECT_GT(c.layout.zero, 0) << layout_label(c.layout);
    EXPECT_EQ(memory::zero_shard_ranks(c.layout), 8) << layout_label(c.layout);
  }
}

// The zero-bubble schedules are ranked when asked for, never by default (Megatron-LM and
// DeepSpeed do not split the backward).
TEST_F(LayoutSearchTest, ZeroBubbleSchedulesOnlyWhenAsked) {
  bool pipelined = false;
  for (const Candidate& c : search_layouts(cost_, base_, space_).ranked) {
    if (c.layout.pp > 1) pipelined = true;
    EXPECT_TRUE(c.layout.schedule == memory::PipelineSchedule::kOneFOneB ||
                c.layout.schedule == memory::PipelineSchedule::kInterleaved)
        << layout_label(c.layout);
  }
  ASSERT_TRUE(pipelined);
  SearchSpace space = space_;
  space.schedules = {memory::PipelineSchedule::kZbH1, memory::PipelineSchedule::kDualPipeV};
  std::set<memory::PipelineSchedule> seen;
  for (const Candidate& c : search_layouts(cost_, base_, space).ranked) {
    if (c.layout.pp > 1) seen.insert(c.layout.schedule);
  }
  EXPECT_EQ(seen, (std::set<memory::PipelineSchedule>{memory::PipelineSchedule::kZbH1,
                                                      memory::PipelineSchedule::kDualPipeV}));
}

// --fix, --sp, --zero, --recompute and --schedule narrow the search to what they allow.
TEST_F(LayoutSearchTest, RestrictionsKeepOnlyTheLayoutsTheyAllow) {
  SearchSpace space = space_;
  space.fixed.tp = 2;
  space.sp = false;
  space.zero_stages = {0, 1};
  space.recompute_modes = {memory::Recompute::kFull};
  space.schedules = {memory::PipelineSchedule::kOneFOneB};
  const SearchResult r = search_layouts(cost_, base_, space);
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& c : r.ranked) {
    EXPECT_EQ(c.layout.tp, 2);
    EXPECT_FALSE(c.layout.sp);
    EXPECT_LE(c.layout.zero, 1);
    EXPECT_EQ(c.layout.recompute, memory::Recompute::kFull);
    EXPECT_EQ(c.layout.vpp, 1);
  }
  space = space_;
  space.max_tp = 2;
  for (const Candidate& c : search_layouts(cost_, base_, space).ranked) EXPECT_LE(c.layout.tp, 2);
}

}  // namespace
}  // namespace partrain::analyzers
