#include "memory/kv_cache.h"

#include <gtest/gtest.h>

#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

// Kwon 2023 (PagedAttention) sec. 3: OPT-13B keeps 2 x 5120 x 40 x 2 B = 800 KB per token,
// so a 2048-token request needs ~1.6 GB.
TEST(KvCache, PagedAttentionOpt13b) {
  ModelConfig opt13b = gpt_model(40, 5120, 40, 50272, 2048);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(opt13b), 819200);
  EXPECT_NEAR(kv_cache_bytes(opt13b, 1, 2048, 40, 1) / 1e9, 1.6, 0.1);
}

// Llama 2 7B: 0.5 MiB per token (4096 tokens = 2 GiB); GQA: Llama 2 70B 320 KiB, Llama 3 8B 128 KiB.
TEST(KvCache, LlamaPerToken) {
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(testing::llama2_7b()), 512.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_cache_bytes(testing::llama2_7b(), 1, 4096, 32, 1), 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(testing::llama2_70b()), 320.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(testing::llama3_8b()), 128.0 * 1024);
}

TEST(KvCache, TensorParallelAndBatch) {
  const ModelConfig m = testing::llama2_70b();
  EXPECT_DOUBLE_EQ(kv_cache_bytes(m, 8, 1000, 80, 8), kv_cache_bytes(m, 1, 1000, 80, 1));
}

}  // namespace
}  // namespace partrain::memory
