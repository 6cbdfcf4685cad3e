#include "memory/activations.h"

#include <gtest/gtest.h>

#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

ActivationSetup setup(double s, double b, int t, bool sp, Recompute recompute, double dropout = 0.1,
                      double element_bytes = 2) {
  ActivationSetup a;
  a.seq = s;
  a.micro_batch = b;
  a.tp = t;
  a.sp = sp;
  a.recompute = recompute;
  a.dropout = dropout;
  a.element_bytes = element_bytes;
  return a;
}

// Korthikanti 2022 Table 2, every row, recomputed layer by layer for GPT-3 175B and MT-NLG 530B.
TEST(Activations, GeneralCountMatchesKorthikantiTable2) {
  for (const ModelConfig& m : {testing::gpt3_175b(), testing::mt_nlg_530b()}) {
    const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
    for (int t : {1, 8}) {
      for (bool sp : {false, true}) {
        if (sp && t == 1) continue;
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          EXPECT_DOUBLE_EQ(layer_activation_bytes(m, setup(2048, 1, t, sp, r)),
                           korthikanti_layer_bytes(2048, 1, h, a, t, sp, r))
              << m.hidden << " t " << t << " sp " << sp << " " << recompute_name(r);
        }
      }
    }
  }
}

// Korthikanti 2022 sec. 5: the attention core is 5as/h of sbh(34 + 5as/h); for GPT-3
// (a 96, s 2048, h 12288) 5as/h = 80, so selective recompute removes 70% of the activations;
// for MT-NLG (a 128, h 20480) 5as/h = 64: 65%.
TEST(Activations, SelectiveRecomputeSavings) {
  auto saving = [](const ModelConfig& m) {
    const double none = layer_activation_bytes(m, setup(2048, 1, 1, false, Recompute::kNone));
    const double selective = layer_activation_bytes(m, setup(2048, 1, 1, false, Recompute::kSelective));
    return 1 - selective / none;
  };
  EXPECT_NEAR(saving(testing::gpt3_175b()), 0.70, 0.005);
  EXPECT_NEAR(saving(testing::mt_nlg_530b()), 0.65, 0.005);
}

// Korthikanti 2022 abstract and sec. 6: sequence parallelism with selective recompute needs ~5x
// less activation memory than tensor parallelism alone (MT-NLG 530B, t = 8: 21 vs 4.25 sbh).
TEST(Activations, SequenceParallelWithSelectiveIsFiveTimesSmaller) {
  const ModelConfig m = testing::mt_nlg_530b();
  const double tp_only = layer_activation_bytes(m, setup(2048, 1, 8, false, Recompute::kNone));
  const double sp_selective = layer_activation_bytes(m, setup(2048, 1, 8, true, Recompute::kSelective));
  EXPECT_NEAR(tp_only / sp_selective, 4.94, 0.01);
  const double sbh = 2048.0 * 20480;
  EXPECT_DOUBLE_EQ(tp_only, sbh * (10 + 24 / 8.0 + 8));  // 5as/(ht) = 8
}

// Without dropout (the built-in workloads) sbh(32 + 2as/h); in fp32 sbh(64 + 4as/h).
TEST(Activations, WithoutDropoutAndFp32) {
  const ModelConfig m = testing::gpt3_175b();
  const double sbh = 2048.0 * 12288, as_h = 96.0 * 2048 / 12288;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, setup(2048, 1, 1, false, Recompute::kNone, 0)),
                   sbh * (32 + 2 * as_h));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, setup(2048, 1, 1, false, Recompute::kNone, 0, 4)),
                   sbh * (64 + 4 * as_h));
}

// Full recompute keeps the layer input: 2sbh, 2sbh/t with SP (Korthikanti 2022 sec. 5).
TEST(Activations, FullRecomputeKeepsTheInput) {
  const ModelConfig m = testing::gpt3_175b();
  const double sbh = 2048.0 * 4 * 12288;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, setup(2048, 4, 8, false, Recompute::kFull)), 2 * sbh);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, setup(2048, 4, 8, true, Recompute::kFull)), 2 * sbh / 8);
}

// Korthikanti 2022 sec. 4.3: input and output layers 4sbh/t (1 + V/h) with SP.
TEST(Activations, OutputLayerAndLogits) {
  const ModelConfig m = testing::gpt3_175b();
  const double sbh = 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(output_activation_bytes(m, setup(2048, 1, 8, true, Recompute::kNone)),
                   4 * sbh / 8 * (1 + 51200.0 / 12288));
  EXPECT_DOUBLE_EQ(embedding_activation_bytes(m, setup(2048, 1, 8, true, Recompute::kNone)), sbh / 8);
  EXPECT_DOUBLE_EQ(embedding_activation_bytes(m, setup(2048, 1, 8, true, Recompute::kNone, 0)), 0);
}

// FlashAttention never stores the a s^2 b scores; GQA shrinks K and V by n_kv/n_h.
TEST(Activations, FlashAttentionAndGroupedKv) {
  const ModelConfig m = testing::llama3_8b();
  ActivationSetup flash = setup(8192, 1, 1, false, Recompute::kNone, 0);
  flash.flash_attention = true;
  const double sbh = 8192.0 * 4096;
  // 2 norms + QKV in + fc1 in (4) + Q (1) + K, V (2 x 8/32) + attention-out in (1): 6.5 sbh
  // elements; SwiGLU 3 s b f; the fp32 log-sum-exp 4 a s b.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, flash),
                   2 * (6.5 * sbh + 3 * 8192.0 * 14336) + 4 * 32 * 8192.0);
  ActivationSetup cp = flash;
  cp.cp = 4;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, cp), layer_activation_bytes(m, flash) / 4);
}

}  // namespace
}  // namespace partrain::memory
