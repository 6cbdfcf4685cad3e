// DeepSeek-V3's published training layout against an 80 GB GPU (DeepSeek-AI 2024, sec. 3.2 and
// 3.3: PP 16, EP 64 over 8 nodes, ZeRO-1 data parallelism, no TP, DualPipe, 2,048 H800 80 GB;
// BF16 weights with FP32 master weights and FP32 gradient accumulation, bf16-fp32grad here).
// The estimate fits it, and does not fit EP 8 in its place: the difference is physical, not
// tuned. DualPipe holds two stages per rank (one per direction) with their gradients, and the
// FP32 gradients of eight times the experts do not fit beside them; under 1F1B EP 8 fits.
//
// What partrain cannot model of DeepSeek's memory policy: it recomputes RMSNorm and the MLA
// up-projections and caches activations in FP8. partrain's recompute modes are none, selective
// (the attention scores) and full; only full brings the activations near DeepSeek's, so the
// check uses it. PP 8 in its place still fits here (57 GiB): the "or PP 8" is not
// reproduced.
#include <gtest/gtest.h>

#include <filesystem>

#include "memory/memory_estimate.h"
#include "memory/pipeline.h"
#include "memory/presets.h"

namespace partrain::memory {
namespace {

const std::filesystem::path kShare = std::filesystem::path(PARTRAIN_SOURCE_DIR) / "share";

EstimateInput deepseek_v3(int pp, int ep, PipelineSchedule schedule) {
  EstimateInput in;
  auto model = load_model_preset(kShare, "deepseek-v3");
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (model.is_ok()) in.model = *model;
  in.recipe = *precision_recipe("bf16-fp32grad", Optimizer::kAdamW);
  auto gpu = load_gpu_preset(kShare, "h800");
  EXPECT_TRUE(gpu.is_ok()) << gpu.status().message();
  if (gpu.is_ok()) in.capacity_bytes = gpu->memory_bytes;
  in.layout.dp = 2048 / pp;
  in.layout.pp = pp;
  in.layout.ep = ep;
  in.layout.zero = 1;
  in.layout.schedule = schedule;
  // 61 layers: the first and last stages lighter (embedding, head), as DeepSeek balances them.
  in.layout.pp_split = pp == 16
                           ? std::vector<int64_t>{3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2}
                           : std::vector<int64_t>{7, 8, 8, 8, 8, 8, 8, 6};
  in.layout.global_batch = 15360;  // sec. 4.2: 15,360 sequences of 4K tokens at the end
  in.layout.recompute = Recompute::kFull;
  in.layout.flash_attention = true;
  return in;
}

TEST(DualPipeFit, PublishedLayoutFitsAnH800AndEp8DoesNot) {
  auto published = estimate_memory(deepseek_v3(16, 64, PipelineSchedule::kDualPipe));
  auto ep8 = estimate_memory(deepseek_v3(16, 8, PipelineSchedule::kDualPipe));
  ASSERT_TRUE(published.is_ok()) << published.status().message();
  ASSERT_TRUE(ep8.is_ok()) << ep8.status().message();
  const StageMemory& p = published->heaviest_stage();
  const StageMemory& e = ep8->heaviest_stage();
  EXPECT_TRUE(published->fits()) << p.total() / (1 << 30) << " GiB";
  EXPECT_FALSE(ep8->fits()) << e.total() / (1 << 30) << " GiB";
  // What breaks it: eight times the experts' FP32 gradients and BF16 weights, twice over.
  EXPECT_GT(e.grads - p.grads, 30e9);
  EXPECT_GT(e.params - p.params, 15e9);
  // Under 1F1B (one copy of each stage) EP 8 fits: DualPipe's second copy decides it.
  auto ep8_1f1b = estimate_memory(deepseek_v3(16, 8, PipelineSchedule::kOneFOneB));
  ASSERT_TRUE(ep8_1f1b.is_ok());
  EXPECT_TRUE(ep8_1f1b->fits());
}

TEST(DualPipeFit, DualPipeHoldsTwoStagesPerRankAndDualPipeVOne) {
  const auto one = estimate_memory(deepseek_v3(16, 64, PipelineSchedule::kOneFOneB));
  const auto dual = estimate_memory(deepseek_v3(16, 64, PipelineSchedule::kDualPipe));
  ASSERT_TRUE(one.is_ok() && dual.is_ok());
  EXPECT_EQ(parameter_copies(PipelineSchedule::kDualPipe), 2);
  EXPECT_EQ(parameter_copies(PipelineSchedule::kDualPipeV), 1);
  // Rank r holds stages r and 15 - r: the 1F1B stages' parameters added.
  for (int r = 0; r < 16; ++r) {
    EXPECT_DOUBLE_EQ(dual->stages[static_cast<size_t>(r)].params_count,
                     one->stages[static_cast<size_t>(r)].params_count +
                         one->stages[static_cast<size_t>(15 - r)].params_count)
        << "rank " << r;
  }
  // DualPipeV over 8 ranks cuts the same 16 stages into a V: one copy, two stages a rank.
  EstimateInput v = deepseek_v3(8, 64, PipelineSchedule::kDualPipeV);
  v.layout.pp_split = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2};
  const auto vee = estimate_memory(v);
  ASSERT_TRUE(vee.is_ok()) << vee.status().message();
  double total = 0, one_total = 0;
  for (const StageMemory& s : vee->stages) total += s.params_count;
  for (const StageMemory& s : one->stages) one_total += s.params_count;
  EXPECT_NEAR(total, one_total, 1e-6 * one_total);
}

}  // namespace
}  // namespace partrain::memory
