// The recommender on mixtures of experts: ep as a search dimension (drawn from dp x cp, dividing
// the experts, restricted by --ep and --fix ep), rankings of the published models that follow
// from the terms (ep kept inside a node when the all_to_all weighs; ep raised when the experts do
// not fit), and DeepSeek-V3's published GPU hours beside partrain's prediction for its layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "analyzers/layout_search.h"
#include "analyzers/recommend_report.h"
#include "analyzers/step_cost.h"
#include "memory/mesh_order.h"
#include "memory/presets.h"

namespace partrain::analyzers {
namespace {

const std::filesystem::path kShare = std::filesystem::path(PARTRAIN_SOURCE_DIR) / "share";

struct Job {
  CostModel cost;
  memory::EstimateInput base;
  SearchSpace space;
};

// A preset model on `gpus` of a preset GPU, 8 a node, bf16 with AdamW, FlashAttention, as
// `partrain recommend` sets it up.
Job job(const char* model_name, const char* gpu_name, int gpus, int64_t global_batch,
        int64_t seq = 0) {
  auto model = memory::load_model_preset(kShare, model_name);
  auto gpu = memory::load_gpu_preset(kShare, gpu_name);
  EXPECT_TRUE(model.is_ok() && gpu.is_ok());
  const memory::PrecisionRecipe recipe =
      *memory::precision_recipe("bf16-mixed", memory::Optimizer::kAdamW);
  Job j{cost_model_for(*model, recipe, *gpu, machines_from(*gpu, gpus, 8, nullptr)),
        {},
        {.gpus = gpus}};
  j.base.model = *model;
  j.base.recipe = recipe;
  j.base.capacity_bytes = gpu->memory_bytes;
  j.base.layout.global_batch = global_batch;
  j.base.layout.seq = seq > 0 ? seq : model->seq;
  j.base.layout.flash_attention = true;
  return j;
}

bool ep_inside_a_node(const memory::TrainingLayout& l) {
  return l.ep > 1 && l.tp * l.ep <= 8;  // ep neighbours tp apart (memory::expert_stride)
}

TEST(ExpertSearch, EveryEpDividesTheDataParallelRanksAndTheExperts) {
  Job j = job("mixtral-8x7b", "h100-80g", 32, 256, 4096);
  j.space.fixed.pp = 1;
  const SearchResult r = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(r.ranked.empty());
  std::set<int> seen;
  for (const Candidate& c : r.ranked) {
    const memory::TrainingLayout& l = c.layout;
    EXPECT_EQ(l.dp * l.cp % l.ep, 0) << layout_label(l);
    EXPECT_EQ(8 % l.ep, 0) << layout_label(l);
    EXPECT_EQ(l.dp * l.tp * l.pp * l.cp, 32);
    seen.insert(l.ep);
  }
  // Every degree the rules allow is tried (the ones that fit are ranked).
  EXPECT_TRUE(seen.contains(8));
  EXPECT_TRUE(seen.contains(4));
  EXPECT_EQ(expert_degrees(j.base.model, 12, j.space), (std::vector<int>{1, 2, 4}));
  // Megatron-Core runs a mixture of experts with tp > 1 only with SP.
  for (const Candidate& c : r.ranked) {
    if (c.layout.tp > 1) EXPECT_TRUE(c.layout.sp) << layout_label(c.layout);
  }
  EXPECT_GT(r.rejected.at(kRejectMoeTpWithoutSp), 0);
  // The counts still add up: each layout ranked or left out under one reason.
  int64_t sum = static_cast<int64_t>(r.ranked.size());
  for (const auto& [reason, count] : r.rejected) {
    if (!is_split_reason(reason)) sum += count;
  }
  EXPECT_EQ(sum, r.layouts());
}

// --ep 8 and --fix ep=8 keep only that degree; a split whose dp x cp it does not divide is left
// out whole under the ep constraint's name.
TEST(ExpertSearch, EpRestrictionsKeepTheirDegreesAndNameTheSplitsTheyLeaveOut) {
  Job j = job("mixtral-8x7b", "h100-80g", 32, 256, 4096);
  j.space.ep_degrees = {8};
  const SearchResult listed = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(listed.ranked.empty());
  for (const Candidate& c : listed.ranked) EXPECT_EQ(c.layout.ep, 8) << layout_label(c.layout);
  // tp 8 leaves dp x cp 4 (or less): no ep 8 there.
  ASSERT_TRUE(listed.rejected.contains(kRejectEpDataRanks));
  EXPECT_GT(listed.rejected.at(kRejectEpDataRanks), 0);
  EXPECT_TRUE(is_split_reason(kRejectEpDataRanks));
  EXPECT_NE(std::string(rejection_words(kRejectEpDataRanks)).find("ep"), std::string::npos);

  j.space.ep_degrees.clear();
  j.space.fixed.ep = 4;
  const SearchResult fixed = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(fixed.ranked.empty());
  for (const Candidate& c : fixed.ranked) EXPECT_EQ(c.layout.ep, 4);
  EXPECT_EQ(layout_label(fixed.ranked.front().layout).find("ep4") == std::string::npos, false);
}

// A dense model is searched as before: ep 1 everywhere, no ep in its labels.
TEST(ExpertSearch, DenseModelsKeepEpOne) {
  Job j = job("llama-2-7b", "h100-80g", 16, 64);
  const SearchResult r = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& c : r.ranked) {
    EXPECT_EQ(c.layout.ep, 1);
    EXPECT_EQ(layout_label(c.layout).find("ep"), std::string::npos);
    EXPECT_FALSE(c.cost.experts.moe);
    EXPECT_TRUE(c.cost.block.exists);  // --explain's "one block" line
  }
  EXPECT_EQ(expert_degrees(j.base.model, 16, j.space), std::vector<int>{1});
}

// Mixtral-8x7B on 64 H100 (8 a node): the all_to_all on NVLink costs a few percent of the step,
// across the NIC several times that, so the best layout that shards its experts keeps its ep
// group inside a node; the best one whose ep group crosses nodes is slower by its all_to_all.
// The winner is that layout or one with no all_to_all at all (ep 1, every GPU holding every
// expert, which fits beside a pipeline when ZeRO shards a node's worth: a hybrid), tying it.
TEST(ExpertRanking, MixtralKeepsTheEpGroupInsideANode) {
  Job j = job("mixtral-8x7b", "h100-80g", 64, 512, 4096);
  const SearchResult r = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(r.ranked.empty());
  const Candidate& winner = r.ranked.front();
  const auto sharded = std::find_if(r.ranked.begin(), r.ranked.end(),
                                    [](const Candidate& c) { return c.layout.ep > 1; });
  ASSERT_NE(sharded, r.ranked.end());
  const Candidate& best = *sharded;
  std::printf("winner %s %.3f s, best with ep %s %.3f s\n", layout_label(winner.layout).c_str(),
              winner.cost.step_s, layout_label(best.layout).c_str(), best.cost.step_s);
  if (winner.layout.ep == 1) {
    EXPECT_EQ(winner.cost.ep_comm_s, 0);
    EXPECT_LT(best.cost.step_s, 1.05 * winner.cost.step_s);  // a tie (recommend's 5%)
  }
  EXPECT_TRUE(ep_inside_a_node(best.layout)) << layout_label(best.layout);
  EXPECT_GT(best.cost.ep_comm_s, 0);
  EXPECT_EQ(best.cost.experts.all_to_all.level, LinkLevel::kIntraNode);
  const Candidate* across = nullptr;
  for (const Candidate& c : r.ranked) {
    if (c.layout.ep > 1 && c.cost.experts.all_to_all.level == LinkLevel::kInterNode) {
      across = &c;
      break;
    }
  }
  ASSERT_NE(across, nullptr);
  EXPECT_GT(across->cost.step_s, best.cost.step_s);
  // Every Mixtral block routes to experts: there is no dense block to show per layer.
  EXPECT_FALSE(best.cost.block.exists);
  EXPECT_GT(across->cost.ep_comm_s, 2 * best.cost.ep_comm_s) << layout_label(across->layout);
}

// With ZeRO-1, tp 1 and no pipeline the experts' weights and gradients are replicated over
// dp x cp / ep: ep 1 and 2 do not fit an 80 GB GPU, so only ep 4 and 8 are ranked.
TEST(ExpertRanking, MoreEpWhenTheExpertsDoNotFit) {
  Job j = job("mixtral-8x7b", "h100-80g", 64, 512, 4096);
  j.space.fixed = {.tp = 1, .pp = 1, .cp = 1, .zero = 1};
  const SearchResult r = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& c : r.ranked) EXPECT_GE(c.layout.ep, 4) << layout_label(c.layout);
  j.space.ep_degrees = {1, 2};
  const SearchResult small = search_layouts(j.cost, j.base, j.space);
  EXPECT_TRUE(small.ranked.empty());
  EXPECT_GT(small.rejected.at(kRejectFit), 0);
  ASSERT_TRUE(small.least_memory.has_value());
  EXPECT_GT(small.least_memory->heaviest.total(), 80e9);
}

// DeepSeek-V3 on 2,048 H800: its 61 blocks admit no even pipeline, so the search keeps pp 1 and
// shards with ZeRO; the all_to_all weighs most across nodes, so the winner's ep group is inside
// a node, and its MFU is a possible one.
TEST(ExpertRanking, DeepSeekV3On2048GpusKeepsTheAllToAllOnNvlink) {
  Job j = job("deepseek-v3", "h800", 2048, 15360);
  const SearchResult r = search_layouts(j.cost, j.base, j.space);
  ASSERT_FALSE(r.ranked.empty());
  const Candidate& best = r.ranked.front();
  EXPECT_TRUE(ep_inside_a_node(best.layout)) << layout_label(best.layout);
  EXPECT_GT(best.cost.mfu, 0.1);
  EXPECT_LT(best.cost.mfu, 0.6);
  EXPECT_GT(r.rejected.at(kRejectPpLayers), 0);
}

// DeepSeek-V3 report sec. 1: 180K H800 GPU hours per trillion tokens, with PP 16, EP 64, ZeRO-1,
// DualPipe (which overlaps the all_to_all with compute) and FP8 GEMMs. partrain models neither
// DualPipe nor FP8: it runs the GEMMs in bf16 and the all_to_all in line (1F1B here), so it
// should predict more hours, but of the same order; without the all_to_all term (what DualPipe
// hides) about the published figure. Nothing was tuned to this number (docs/recommend.md).
TEST(ExpertRanking, DeepSeekV3PublishedGpuHoursBesideThePrediction) {
  Job j = job("deepseek-v3", "h800", 2048, 15360);
  memory::EstimateInput in = j.base;
  in.layout.dp = 128;
  in.layout.pp = 16;
  in.layout.ep = 64;
  in.layout.zero = 1;
  in.layout.micro_batch = 1;
  in.layout.pp_split = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3};
  auto candidate = evaluate_layout(j.cost, in);
  ASSERT_TRUE(candidate.is_ok()) << candidate.status().message();
  const StepCost& c = candidate->cost;
  auto gpu_hours_per_trillion = [](double step_s, double tokens_per_step) {
    return 1e12 / tokens_per_step * step_s * 2048 / 3600;
  };
  const double tokens_per_step = 15360.0 * 4096;
  const double predicted = gpu_hours_per_trillion(c.step_s, tokens_per_step);
  const double overlapped = gpu_hours_per_trillion(c.step_s - c.ep_comm_s, tokens_per_step);
  std::printf(
      "DeepSeek-V3, PP16 EP64 ZeRO-1 on 2048 h800: %.0fK GPU hours per 1T tokens "
      "predicted (%.0fK with the all_to_all hidden); published 180K\n",
      predicted / 1e3, overlapped / 1e3);
  EXPECT_GT(predicted, 180e3);
  EXPECT_LT(predicted, 2.5 * 180e3);
  EXPECT_GT(overlapped, 0.5 * 180e3);
  EXPECT_LT(overlapped, 1.5 * 180e3);
  // The ep 64 group spans 8 nodes: its all_to_all runs on the NIC.
  EXPECT_EQ(c.experts.all_to_all.level, LinkLevel::kInterNode);
  EXPECT_EQ(c.experts.expert_data_ranks, 2);
}

}  // namespace
}  // namespace partrain::analyzers
