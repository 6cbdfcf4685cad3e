#include "memory/flops.h"

#include <gtest/gtest.h>

#include "memory/parameter_count.h"
#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

// The general count reduces to Narayanan 2021 eq. 3 for GPT, with and without recomputation.
TEST(Flops, GeneralCountIsNarayananEquation3ForGpt) {
  ModelConfig gpt3 = testing::gpt3_175b();
  for (bool full : {false, true}) {
    const double expected = narayanan_flops(1536, 2048, 96, 12288, 51200, full);
    const double general = training_flops(gpt3, 1536, 2048, full ? Recompute::kFull : Recompute::kNone);
    EXPECT_NEAR(general / expected, 1.0, 1e-12) << "full recompute " << full;
  }
}

// Narayanan 2021 sec. 5.1: with recomputation ~8 FLOPs per parameter per token (6 without).
TEST(Flops, PerParameterPerToken) {
  ModelConfig gpt3 = testing::gpt3_175b();
  const double params = total_params(gpt3);
  EXPECT_NEAR(training_flops_per_token(gpt3, 2048, Recompute::kFull) / params, 8.0, 0.25);
  EXPECT_NEAR(training_flops_per_token(gpt3, 2048, Recompute::kNone) / params, 6.0, 0.2);
}

// Narayanan 2021 sec. 5.1: GPT-3 175B on 300B tokens, 1024 A100s at 140 TFLOP/s: ~34 days;
// the 1T model on 450B tokens, 3072 GPUs at 163 TFLOP/s: ~84 days.
TEST(Flops, NarayananTrainingTimeEstimates) {
  EXPECT_NEAR(training_days(300e9, 175e9, 1024, 140e12, true), 34, 0.5);
  EXPECT_NEAR(training_days(450e9, 1e12, 3072, 163e12, true), 84, 1.5);
}

// Narayanan 2021 Table 1: 163 TFLOP/s per A100 is 52% of the 312 TFLOP/s peak.
TEST(Flops, ModelFlopsUtilisation) {
  EXPECT_NEAR(mfu(163e12 * 10 * 3072, 10, 3072, 312e12), 0.52, 0.005);
}

// Korthikanti 2022 sec. 5: selective recompute only repeats QK^T and AV (4 B s^2 h per layer).
TEST(Flops, SelectiveRecomputeAddsOnlyTheAttentionCore) {
  ModelConfig gpt3 = testing::gpt3_175b();
  const double extra = training_flops(gpt3, 1, 2048, Recompute::kSelective) -
                       training_flops(gpt3, 1, 2048, Recompute::kNone);
  EXPECT_DOUBLE_EQ(extra, 96.0 * 4 * 2048 * 2048 * 12288);
  // A few percent at most, against a third more for full recompute.
  EXPECT_LT(extra / training_flops(gpt3, 1, 2048, Recompute::kNone), 0.05);
}

// Heads of their own width: the attention core's QK^T and AV run over heads x head_dim (here
// 2 h), the weights' FLOPs follow the wider Q and attention-out matrices.
TEST(Flops, HeadsOfTheirOwnWidthCountTheirWidth) {
  ModelConfig model = gpt_model(2, 1024, 16, 1000, 512);
  model.explicit_head_dim = 128;
  const double h = 1024, q = 2048, s = 512, layers = 2;
  const double forward_block = 2 * s * (4 * h * q + 8 * h * h) + 4 * s * s * q;
  const double forward = layers * forward_block + 2 * s * h * 1000;
  EXPECT_NEAR(training_flops(model, 1, s, Recompute::kNone) / (3 * forward), 1.0, 1e-12);
}

TEST(Flops, BareCountUsesSixNAndEightWithFullRecompute) {
  EXPECT_DOUBLE_EQ(training_flops(bare_model(1e9), 2, 1000, Recompute::kNone), 6e9 * 2000);
  // Full recompute repeats the forward (2 N): 8 N, as Narayanan 2021's 8 T P.
  EXPECT_DOUBLE_EQ(training_flops(bare_model(1e9), 2, 1000, Recompute::kFull), 8e9 * 2000);
  EXPECT_DOUBLE_EQ(training_flops(bare_model(1e9), 2, 1000, Recompute::kSelective), 6e9 * 2000);
}

}  // namespace
}  // namespace partrain::memory
