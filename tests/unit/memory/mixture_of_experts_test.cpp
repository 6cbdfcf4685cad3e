// Mixtures of experts in the estimator: published parameter counts, expert parallelism's
// sharding of parameters, gradients and optimizer states, MoE activations, and the layouts
// resolve_layout refuses.
#include <gtest/gtest.h>

#include "memory/activations.h"
#include "memory/flops.h"
#include "memory/memory_estimate.h"
#include "memory/parameter_count.h"
#include "memory/presets.h"

namespace partrain::memory {
namespace {

const std::filesystem::path kShare = std::filesystem::path(PARTRAIN_SOURCE_DIR) / "share";

ModelConfig preset(const char* name) {
  auto model = load_model_preset(kShare, name);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return model.is_ok() ? *model : ModelConfig{};
}

// Jiang 2024 (Mixtral of Experts) sec. 2: 46.7B parameters, 12.9B used per token.
TEST(MixtureOfExperts, MixtralCountsAreThePublishedOnes) {
  const ModelConfig mixtral = preset("mixtral-8x7b");
  EXPECT_NEAR(total_params(mixtral) / 1e9, 46.7, 0.05);
  EXPECT_NEAR(active_params(mixtral) / 1e9, 12.9, 0.05);
  // Mistral's 8x22B: 141B total, 39B active.
  const ModelConfig large = preset("mixtral-8x22b");
  EXPECT_NEAR(total_params(large) / 1e9, 141, 0.5);
  EXPECT_NEAR(active_params(large) / 1e9, 39, 0.5);
}

// DeepSeek-V3 report sec. 4.2: 671B total (without the 14B multi-token-prediction module), 37B
// activated per token. The report states both to the billion, truncated: 671.03B and 37.55B
// counted here (embeddings and head included, as Mixtral's 12.9B includes them).
TEST(MixtureOfExperts, DeepSeekV3CountsAreThePublishedOnes) {
  const ModelConfig v3 = preset("deepseek-v3");
  EXPECT_EQ(std::floor(total_params(v3) / 1e9), 671);
  EXPECT_EQ(std::floor(active_params(v3) / 1e9), 37);
  // Latent attention, counted from its projections (DeepSeek-V2 sec. 2.1): 187.1M per block.
  const LayerParams dense = layer_params(v3, 0);
  EXPECT_NEAR((dense.total() - 3.0 * 7168 * 18432 - 2 * 7168) / 1e6, 187.107, 0.001);
  // Its first three blocks are dense, the rest hold 256 experts of 3 x 7168 x 2048.
  EXPECT_DOUBLE_EQ(dense.experts, 0);
  EXPECT_DOUBLE_EQ(layer_params(v3, 3).experts, 256.0 * 3 * 7168 * 2048);
}

// A dense model's counts are what they were: active is total, the blocks hold no experts.
TEST(MixtureOfExperts, DenseModelsHaveNoExperts) {
  const ModelConfig llama = preset("llama-3-70b");
  EXPECT_DOUBLE_EQ(active_params(llama), total_params(llama));
  EXPECT_DOUBLE_EQ(layer_params(llama, 5).experts, 0);
  EXPECT_DOUBLE_EQ(blocks_matmul_params(llama), 80 * layer_matmul_params(llama));
}

// A token multiplies by its top_k experts only: training FLOPs follow the active count, about
// 6 x active parameters per token (Kaplan 2020), not 6 x total.
TEST(MixtureOfExperts, FlopsFollowTheActiveParameters) {
  const ModelConfig mixtral = preset("mixtral-8x7b");
  const double per_token = training_flops_per_token(mixtral, 4096, Recompute::kNone);
  EXPECT_NEAR(per_token / (6 * active_params(mixtral)), 1.0, 0.2);
  EXPECT_LT(per_token, 6 * total_params(mixtral) / 3);
}

EstimateInput deepseek_input(int ep) {
  EstimateInput in;
  in.model = preset("deepseek-v3");
  in.recipe = *precision_recipe("bf16-mixed", Optimizer::kAdamW);
  in.reserve_bytes = 0;
  in.layout.dp = 128;
  in.layout.pp = 16;
  in.layout.ep = ep;
  in.layout.zero = 1;
  in.layout.pp_split = {3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2};
  in.layout.global_batch = 15360;
  in.layout.recompute = Recompute::kFull;
  return in;
}

// Expert parallelism divides the experts a GPU holds by ep, and ZeRO shards their optimizer
// states over the dp / ep ranks that hold the same experts (Megatron-LM's expert-data-parallel
// group), while dense weights stay sharded over all dp ranks.
TEST(MixtureOfExperts, ExpertParallelismShardsTheExpertsStates) {
  auto wide = estimate_memory(deepseek_input(64));
  auto narrow = estimate_memory(deepseek_input(8));
  ASSERT_TRUE(wide.is_ok()) << wide.status().message();
  ASSERT_TRUE(narrow.is_ok()) << narrow.status().message();
  const StageMemory& w = wide->stages[1];
  const StageMemory& n = narrow->stages[1];
  const double expert = 3.0 * 7168 * 2048;
  EXPECT_DOUBLE_EQ(w.expert_params_count, 4 * (256 / 64) * expert);  // 4 MoE blocks, 4 experts
  EXPECT_DOUBLE_EQ(n.expert_params_count, 4 * (256 / 8) * expert);
  EXPECT_DOUBLE_EQ(w.params_count - w.expert_params_count, n.params_count - n.expert_params_count);
  const double dense = w.params_count - w.expert_params_count;
  // bf16-mixed, ZeRO-1: 2 + 2 bytes whole, 12 sharded (dense over 128, experts over 128/ep).
  EXPECT_DOUBLE_EQ(w.optimizer, 12 * dense / 128 + 12 * w.expert_params_count / 2);
  EXPECT_DOUBLE_EQ(n.optimizer, 12 * dense / 128 + 12 * n.expert_params_count / 16);
  // Eight times the experts on every GPU: 2 + 2 bytes more of each (the optimizer's 12 are
  // spread over eight times the expert-data ranks: the same).
  EXPECT_DOUBLE_EQ(w.params, 2 * w.params_count);
  EXPECT_DOUBLE_EQ(n.grads - w.grads, 2 * (n.expert_params_count - w.expert_params_count));
  EXPECT_NEAR(n.optimizer, w.optimizer, 1e-6 * w.optimizer);
  EXPECT_GT(n.total() - w.total(), 19e9);
}

// Each token sends top_k copies to the experts: the dispatched tokens, their outputs and the
// experts' intermediates grow with top_k and with a capacity factor, which pads every expert's
// slots; the dense blocks of the same model keep none of it.
TEST(MixtureOfExperts, ActivationsGrowWithTopKAndTheCapacityFactor) {
  ModelConfig model = preset("mixtral-8x7b");
  ActivationSetup a;
  a.seq = 4096;
  a.flash_attention = true;
  const double dropless = layer_activation_bytes(model, a, 0);
  model.moe.capacity_factor = 1.25;
  const double capped = layer_activation_bytes(model, a, 0);
  // Slots: 2 x 1.25 per token instead of 2: inputs and outputs (2 x h) and SwiGLU's 3 x f.
  const double extra_slots = 0.25 * 2 * 4096;
  EXPECT_DOUBLE_EQ(capped - dropless, 2 * extra_slots * (2 * 4096.0 + 3 * 14336.0));
  model.moe.capacity_factor = 0;
  model.moe.top_k = 1;
  EXPECT_LT(layer_activation_bytes(model, a, 0), dropless);
  const ModelConfig v3 = preset("deepseek-v3");
  EXPECT_LT(layer_activation_bytes(v3, a, 0), layer_activation_bytes(v3, a, 3));
}

// Layouts the estimator refuses, naming the rule: ep on a dense model, ep that does not divide
// the experts or the data-parallel ranks it is drawn from.
TEST(MixtureOfExperts, ExpertParallelDegreesThatDoNotFitAreRefused) {
  EstimateInput in = deepseek_input(64);
  in.layout.ep = 3;
  auto status = estimate_memory(in).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--ep 3 must divide the 256 routed experts"), std::string::npos)
      << status.message();
  in.layout.ep = 256;
  status = estimate_memory(in).status();
  EXPECT_NE(status.message().find("--ep 256 must divide --dp x --cp = 128"), std::string::npos)
      << status.message();
  in.model = preset("llama-3-70b");
  in.layout.ep = 2;
  in.layout.pp_split.clear();
  in.layout.pp = 1;
  status = estimate_memory(in).status();
  EXPECT_NE(status.message().find("model 'llama-3-70b' has none"), std::string::npos)
      << status.message();
}

// A model file's mixture-of-experts fields are checked as the rest: top_k past the experts, and
// expert fields on a dense model, are unreadable input naming the field.
TEST(MixtureOfExperts, MalformedExpertFieldsNameTheField) {
  auto too_many = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 8, "heads": 2,
      "vocab": 10, "seq": 4, "experts": 4, "top_k": 5, "moe_ffn": 16})",
                                   "x.json");
  EXPECT_EQ(too_many.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(too_many.status().message().find("top_k (5) must be between 1 and experts (4)"),
            std::string::npos)
      << too_many.status().message();
  auto dense = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 8, "heads": 2,
      "vocab": 10, "seq": 4, "top_k": 2})",
                                "x.json");
  EXPECT_NE(dense.status().message().find("top_k is for a mixture of experts"), std::string::npos)
      << dense.status().message();
  auto latent = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 8, "heads": 2,
      "vocab": 10, "seq": 4, "attention": "mla", "kv_lora_rank": 4, "qk_nope_dim": 2,
      "qk_rope_dim": 2})",
                                 "x.json");
  EXPECT_NE(latent.status().message().find("missing field 'v_head_dim'"), std::string::npos)
      << latent.status().message();
}

}  // namespace
}  // namespace partrain::memory
