#include "memory/parameter_count.h"

#include <gtest/gtest.h>

#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

using testing::llama;

// Narayanan 2021 Table 1 / sec. 5.1: GPT-3 175B (l 96, h 12288, V 51200, s 2048) = 174.6e9.
TEST(ParameterCount, Gpt3ClosedFormIsNarayanansFigure) {
  EXPECT_NEAR(gpt_params_closed_form(96, 12288, 51200, 2048) / 1e9, 174.6, 0.05);
}

// The layer-by-layer count is the closed form plus the final LayerNorm (2h) the paper leaves out.
TEST(ParameterCount, GeneralCountMatchesClosedFormForGpt) {
  ModelConfig gpt3 = testing::gpt3_175b();
  EXPECT_DOUBLE_EQ(total_params(gpt3), gpt_params_closed_form(96, 12288, 51200, 2048) + 2 * 12288);
  EXPECT_DOUBLE_EQ(layer_params(gpt3).total(), 12.0 * 12288 * 12288 + 13.0 * 12288);  // 12h^2 + 13h
}

// Narayanan 2021 Table 1, other rows: 1T (l 128, h 25600) = 1008.0e9; 18.4B (l 40, h 6144) = 18.4e9.
TEST(ParameterCount, NarayananTableRows) {
  EXPECT_NEAR(gpt_params_closed_form(128, 25600, 51200, 2048) / 1e9, 1008.0, 0.5);
  EXPECT_NEAR(gpt_params_closed_form(40, 6144, 51200, 2048) / 1e9, 18.4, 0.05);
}

// Touvron 2023 (Llama 2): 7B has 6,738,415,616 parameters (Hugging Face model card), 13B 13.0e9.
TEST(ParameterCount, Llama2) {
  EXPECT_DOUBLE_EQ(total_params(testing::llama2_7b()), 6738415616.0);
  EXPECT_DOUBLE_EQ(total_params(llama(40, 5120, 40, 40, 13824, 32000, 4096)), 13015864320.0);
}

// Llama 2 70B and Llama 3 8B use grouped-query attention (8 KV heads): 68.98e9 and 8.03e9.
TEST(ParameterCount, GroupedQueryAttention) {
  EXPECT_DOUBLE_EQ(total_params(testing::llama2_70b()), 68976648192.0);
  EXPECT_DOUBLE_EQ(total_params(testing::llama3_8b()), 8030261248.0);
  ModelConfig mha = testing::llama3_8b();
  mha.kv_heads = mha.heads;  // without GQA K and V would add 2 x 4096 x 3072 per layer
  EXPECT_DOUBLE_EQ(total_params(mha) - total_params(testing::llama3_8b()), 32.0 * 2 * 4096 * 3072);
}

// Dubey 2024 (Llama 3) Table 3: 405B (l 126, h 16384, 128 heads, 8 KV heads, ffn 53248).
TEST(ParameterCount, Llama3_405b) {
  EXPECT_NEAR(total_params(llama(126, 16384, 128, 8, 53248, 128256, 8192)) / 1e9, 405.85, 0.01);
}

// BLOOM (BigScience 2022): 176,247,271,424 with ALiBi (no position weights), an embedding
// LayerNorm and tied embeddings; GPT-NeoX-20B (Black 2022): 20,554,567,680, rotary, untied.
TEST(ParameterCount, BloomAndNeox) {
  ModelConfig bloom = gpt_model(70, 14336, 112, 250880, 2048);
  bloom.position = PositionKind::kAlibi;
  bloom.embedding_norm = true;
  EXPECT_DOUBLE_EQ(total_params(bloom), 176247271424.0);
  ModelConfig neox = gpt_model(44, 6144, 64, 50432, 2048);
  neox.position = PositionKind::kRotary;
  neox.tied_embeddings = false;
  EXPECT_DOUBLE_EQ(total_params(neox), 20554567680.0);
}

// Megatron-LM's split: matrices and column-parallel biases over t, norms and row biases not.
TEST(ParameterCount, TensorParallelSplit) {
  LayerParams gpt3 = layer_params(testing::gpt3_175b());
  const double h = 12288;
  EXPECT_DOUBLE_EQ(gpt3.replicated, 2 * h + 4 * h);  // attention-out and fc2 biases, 2 LayerNorms
  EXPECT_DOUBLE_EQ(gpt3.per_rank(8), (12 * h * h + 7 * h) / 8 + 6 * h);
  LayerParams llama7 = layer_params(testing::llama2_7b());
  EXPECT_DOUBLE_EQ(llama7.replicated, 2 * 4096.0);  // two RMSNorms, no biases
}

TEST(ParameterCount, DeepMlpAndBareCount) {
  ModelConfig mlp;
  mlp.architecture = Architecture::kMlp;
  mlp.layers = 8;
  mlp.hidden = 1024;
  EXPECT_DOUBLE_EQ(total_params(mlp), 8.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(total_params(bare_model(7.5e9)), 7.5e9);
}

}  // namespace
}  // namespace partrain::memory
