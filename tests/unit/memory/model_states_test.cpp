#include "memory/model_states.h"

#include <gtest/gtest.h>

namespace partrain::memory {
namespace {

PrecisionRecipe recipe(std::string_view name, Optimizer optimizer = Optimizer::kAdamW) {
  auto r = precision_recipe(name, optimizer);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : PrecisionRecipe{};
}

TEST(ModelStates, RecipesBytesPerParameter) {
  EXPECT_DOUBLE_EQ(recipe("fp32-adam").total(), 16);
  EXPECT_DOUBLE_EQ(recipe("bf16-mixed").total(), 16);
  EXPECT_DOUBLE_EQ(recipe("bf16-fp32grad").total(), 18);
  EXPECT_DOUBLE_EQ(recipe("bf16-fp32grad-accum").total(), 20);
  EXPECT_EQ(recipe("fp32").name, "fp32-adam");  // launch's names are aliases
  EXPECT_EQ(recipe("bf16").name, "bf16-mixed");
  EXPECT_DOUBLE_EQ(recipe("bf16-mixed").optimizer_bytes, 12);  // ZeRO's K = 12
  // Loss-scaled fp16 (Megatron-LM's --fp16, DeepSpeed's fp16) keeps bf16-mixed's bytes.
  EXPECT_EQ(recipe("fp16").name, "fp16-mixed");
  EXPECT_DOUBLE_EQ(recipe("fp16-mixed").total(), 16);
  EXPECT_DOUBLE_EQ(recipe("fp16").grad_bytes, recipe("bf16-mixed").grad_bytes);
  EXPECT_EQ(precision_recipe("fp8", Optimizer::kAdamW).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ModelStates, SgdKeepsNoState) {
  EXPECT_DOUBLE_EQ(recipe("fp32", Optimizer::kSgd).total(), 8);
  // `memory --optimizer sgd --precision fp32` printed "recipe fp32-adam: 4 + 4 + 0": the name
  // follows the optimizer.
  EXPECT_EQ(recipe("fp32", Optimizer::kSgd).name, "fp32-sgd");
  EXPECT_EQ(recipe("fp32-adam", Optimizer::kSgd).name, "fp32-sgd");
  EXPECT_DOUBLE_EQ(recipe("bf16", Optimizer::kSgd).optimizer_bytes, 4);  // fp32 master copy only
}

TEST(ModelStates, CustomBytesPerParam) {
  auto custom = with_bytes_per_param(recipe("bf16-mixed"), 12);
  ASSERT_TRUE(custom.is_ok());
  EXPECT_DOUBLE_EQ(custom->optimizer_bytes, 8);
  EXPECT_DOUBLE_EQ(custom->total(), 12);
  EXPECT_FALSE(with_bytes_per_param(recipe("bf16-mixed"), 3).is_ok());
}

// ZeRO (Rajbhandari 2019) Figure 1: Psi = 7.5B, N_d = 64, K = 12: baseline 120 GB,
// P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB per device.
TEST(ModelStates, ZeroPaperFigure1) {
  const PrecisionRecipe mixed = recipe("bf16-mixed");
  EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 0, 64).total() / 1e9, 120.0, 0.05);
  EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 1, 64).total() / 1e9, 31.4, 0.05);
  EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 2, 64).total() / 1e9, 16.6, 0.05);
  EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 3, 64).total() / 1e9, 1.9, 0.05);
}

// ZeRO Table 1, the 7.5B row over N_d = 1, 4, 16, 64, 256, 1024 (GB per device).
TEST(ModelStates, ZeroPaperTable1) {
  const PrecisionRecipe mixed = recipe("bf16-mixed");
  const int nd[] = {1, 4, 16, 64, 256, 1024};
  const double os[] = {120, 52.5, 35.6, 31.4, 30.4, 30.1};
  const double os_g[] = {120, 41.3, 21.6, 16.6, 15.4, 15.1};
  const double os_g_p[] = {120, 30, 7.5, 1.88, 0.47, 0.12};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 1, nd[i]).total() / 1e9, os[i], 0.06) << nd[i];
    EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 2, nd[i]).total() / 1e9, os_g[i], 0.06) << nd[i];
    EXPECT_NEAR(model_state_bytes(7.5e9, mixed, 3, nd[i]).total() / 1e9, os_g_p[i], 0.01) << nd[i];
  }
  // ZeRO sec. 1: a 1T model with P_os+g+p over 1024 GPUs needs ~16 GB per GPU.
  EXPECT_NEAR(model_state_bytes(1e12, mixed, 3, 1024).total() / 1e9, 16, 0.5);
}

TEST(ModelStates, ShardingSplitsByCategory) {
  ModelStateBytes zero2 = model_state_bytes(1e9, recipe("bf16-mixed"), 2, 4);
  EXPECT_DOUBLE_EQ(zero2.params, 2e9);
  EXPECT_DOUBLE_EQ(zero2.grads, 0.5e9);
  EXPECT_DOUBLE_EQ(zero2.optimizer, 3e9);
}

}  // namespace
}  // namespace partrain::memory
