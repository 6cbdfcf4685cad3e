#include "memory/memory_estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "memory/activations.h"
#include "memory/explain.h"
#include "memory/memory_report.h"
#include "memory/parameter_count.h"
#include "memory/sweep.h"
#include "tests/unit/memory/test_models.h"

namespace partrain::memory {
namespace {

EstimateInput input_for(ModelConfig model, const char* precision = "bf16-mixed") {
  EstimateInput in;
  in.model = std::move(model);
  in.recipe = *precision_recipe(precision, Optimizer::kAdamW);
  in.reserve_bytes = 0;
  return in;
}

// ZeRO 2019 Figure 1 through the whole estimator: 7.5B over 64 ranks, model states only.
TEST(MemoryEstimate, ZeroExampleThroughTheEstimator) {
  EstimateInput in = input_for(bare_model(7.5e9));
  in.layout.dp = 64;
  const double expected[] = {120, 31.4, 16.6, 1.9};
  for (int zero = 0; zero <= 3; ++zero) {
    in.layout.zero = zero;
    auto e = estimate_memory(in);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    const StageMemory& s = e->heaviest_stage();
    EXPECT_NEAR((s.params + s.grads + s.optimizer) / 1e9, expected[zero], 0.05) << "zero " << zero;
    EXPECT_DOUBLE_EQ(s.activations, 0);
  }
}

// Inputs no job has (a 10^11-token sequence, 10^30 parameters) give estimates past what int64
// byte counts hold: refused naming the largest category, never wrapped into negative bytes.
TEST(MemoryEstimate, EstimatesPastFourEiBAreRefused) {
  EstimateInput long_seq = input_for(testing::llama2_7b());
  long_seq.model.seq = 99999999999;
  auto e = estimate_memory(long_seq);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("mostly activations"), std::string::npos)
      << e.status().message();
  auto huge = estimate_memory(input_for(bare_model(1e30)));
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("mostly optimizer"), std::string::npos)
      << huge.status().message();
  // The largest real model of the presets at one GPU is far below the bound.
  EXPECT_TRUE(estimate_memory(input_for(testing::gpt3_175b())).is_ok());
}

// Pipeline stages hold every parameter once, plus the last stage's copy of tied embeddings.
TEST(MemoryEstimate, StagesPartitionTheParameters) {
  for (ModelConfig m : {testing::llama2_7b(), testing::gpt3_175b()}) {
    EstimateInput in = input_for(m);
    in.layout.pp = 4;
    auto e = estimate_memory(in);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    double sum = 0;
    for (const auto& s : e->stages) sum += s.params_count;
    const double tied_copy = m.tied_embeddings ? word_embedding_params(m) : 0;
    EXPECT_DOUBLE_EQ(sum, total_params(m) + tied_copy);
  }
}

// Korthikanti 2022 sec. 4.2.3: under 1F1B with m >= p the first stage holds L layers' worth
// of activations (p micro-batches of L/p layers), whatever p is.
TEST(MemoryEstimate, FirstStageHoldsAllLayersWorthUnder1F1B) {
  EstimateInput in = input_for(testing::gpt3_175b());
  in.layout.tp = 8;
  in.layout.sp = true;
  in.layout.recompute = Recompute::kSelective;
  in.layout.dropout = 0.1;  // the paper's setting: 1-byte masks counted
  ActivationSetup a;
  a.dropout = 0.1;
  a.seq = 2048;
  a.tp = 8;
  a.sp = true;
  a.recompute = Recompute::kSelective;
  const double layer = layer_activation_bytes(in.model, a);
  for (int p : {1, 2, 4, 8}) {
    in.layout.pp = p;
    in.layout.global_batch = 64;
    auto e = estimate_memory(in);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    const double input_layer = embedding_activation_bytes(in.model, a) * p;  // p in flight
    const double output_layer = p == 1 ? output_activation_bytes(in.model, a) : 0;
    const double without_io = e->stages[0].activations - input_layer - output_layer;
    EXPECT_DOUBLE_EQ(without_io, 96 * layer) << "p " << p;
  }
  // GPT-3 175B, t 8 with SP and selective recompute: 34 s b h / t x L (Table 2) = 10.27 GB.
  EXPECT_NEAR(96 * layer / 1e9, 10.27, 0.01);
}

// Full recompute: every stage adds one block's recomputed activations beside its stored inputs
// (less the block's own input, already stored). On the last stage the head of the micro-batch in
// backward is freed before its last block is recomputed, so the larger of the two counts, and
// GPipe's other micro-batches' heads are added.
TEST(MemoryEstimate, FullRecomputeAddsOneBlockNotAlongsideItsOwnHead) {
  for (ModelConfig m : {testing::gpt3_175b(), testing::llama2_7b()}) {
    EstimateInput in = input_for(m);
    in.layout.recompute = Recompute::kFull;
    in.layout.pp = 2;
    in.layout.global_batch = 8;
    for (PipelineSchedule schedule : {PipelineSchedule::kOneFOneB, PipelineSchedule::kGpipe}) {
      in.layout.schedule = schedule;
      auto e = estimate_memory(in);
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      const ActivationSetup a = activation_setup(e->layout, 2);
      ASSERT_EQ(a.recompute, Recompute::kFull);
      ActivationSetup working = a;
      working.recompute = Recompute::kNone;
      const double stored = layer_activation_bytes(m, a);
      const double recomputed = layer_activation_bytes(m, working) - stored;
      const double head = output_activation_bytes(m, a);
      const double layers = static_cast<double>(e->stages[1].layers);
      const double in_flight = e->stages[1].in_flight;
      const double heads_held =
          schedule == PipelineSchedule::kGpipe ? static_cast<double>(e->layout.micro_batches) : 1;
      EXPECT_DOUBLE_EQ(e->stages[0].activations,
                       static_cast<double>(e->stages[0].layers) * stored *
                               e->stages[0].in_flight +
                           recomputed);
      EXPECT_DOUBLE_EQ(e->stages[1].activations, layers * stored * in_flight +
                                                     (heads_held - 1) * head +
                                                     std::max(head, recomputed));
    }
  }
}

// ZeRO-3's comm, along the units' backward order: a unit with its gradients, the previous unit's
// gradients in their reduce-scatter, the next unit prefetched. GPT-2 small (V = 50257 > 12 h):
// the token embedding, 38.6 M parameters, outweighs a block's 7.1 M; its peak is at the end of
// backward, beside the first block's gradients and the position embedding prefetched.
TEST(MemoryEstimate, ZeroThreeCommFollowsTheBackwardOrderOfUnits) {
  const ModelConfig gpt2 = gpt_model(12, 768, 12, 50257, 1024);
  EstimateInput in = input_for(gpt2);  // bf16-mixed: 2 B parameters and gradients
  in.layout.dp = 8;
  in.layout.zero = 3;
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const double block = layer_params(gpt2).total();
  const double embedding = word_embedding_params(gpt2);
  const double position = position_params(gpt2);
  EXPECT_EQ(backward_units(gpt2, e->layout, 0),
            (std::vector<double>{norm_params(gpt2), embedding, block, block, block, embedding,
                                 position}));
  EXPECT_DOUBLE_EQ(e->stages[0].comm, embedding * (2 + 2) + block * 2 + position * 2);
  // Blocks between two blocks: 8 B per element of one (llama-2-7b's untied head, 131 M, is
  // smaller than a block, 202 M).
  in = input_for(testing::llama2_7b());
  in.layout.dp = 8;
  in.layout.zero = 3;
  e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(e->stages[0].comm, 8 * layer_params(testing::llama2_7b()).total());
  // llama-3-8b: its untied head and its embedding (525 M each) are at the two ends, never side
  // by side: the peak is the head with its gradients, the final norm's in their reduce-scatter
  // and the last block prefetched.
  const ModelConfig llama3 = testing::llama3_8b();
  in = input_for(llama3);
  in.layout.dp = 8;
  in.layout.zero = 3;
  e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(e->stages[0].comm, lm_head_params(llama3) * 4 + norm_params(llama3) * 2 +
                                          layer_params(llama3).total() * 2);
}

// Context-parallel ranks hold the same weights as their dp peers: ZeRO shards over dp x cp, as
// Megatron's distributed optimizer does and as recommend costs the step (it sharded over dp:
// the optimizer twice recommend's), and dp = 1 with cp = 2 still reduces gradients in a bucket.
TEST(MemoryEstimate, ZeroShardsOverTheContextParallelRanksToo) {
  const ModelConfig model = testing::llama2_7b();
  EstimateInput in = input_for(model);
  in.layout.dp = 4;
  in.layout.cp = 2;
  in.layout.zero = 1;
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(e->stages[0].optimizer, 12 * total_params(model) / 8);
  in.layout.dp = 1;
  in.layout.zero = 0;
  e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_DOUBLE_EQ(e->stages[0].comm, in.bucket_bytes);
}

// A hybrid (HSDP) shards the states over its shard group only: each of the 2 replicas of a
// shard of 8 holds twice what full sharding over 16 leaves a rank; activations do not change.
TEST(MemoryEstimate, HybridShardsOverItsShardGroupOnly) {
  const ModelConfig model = testing::llama2_7b();
  EstimateInput in = input_for(model);
  in.layout.dp = 16;
  in.layout.zero = 3;
  const EstimateInput whole = in;
  auto full = estimate_memory(whole);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  in.layout.shard = 8;
  auto hybrid = estimate_memory(in);
  ASSERT_TRUE(hybrid.is_ok()) << hybrid.status().message();
  const StageMemory& f = full->stages[0];
  const StageMemory& h = hybrid->stages[0];
  EXPECT_DOUBLE_EQ(h.params, 2 * total_params(model) / 8);
  EXPECT_DOUBLE_EQ(h.params, 2 * f.params);
  EXPECT_DOUBLE_EQ(h.grads, 2 * f.grads);
  EXPECT_DOUBLE_EQ(h.optimizer, 2 * f.optimizer);
  EXPECT_DOUBLE_EQ(h.activations, f.activations);
  const std::string text = format_estimate_text(in, *hybrid, {}, false);
  EXPECT_NE(text.find("zero 3 (sharded over 8, 2 replicas)"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(format_estimate_json(in, *hybrid, {}))["layout"]["shard"], 8);
  EXPECT_EQ(nlohmann::json::parse(format_estimate_json(whole, *full, {}))["layout"]["shard"], 16);
  const std::string explained = format_explain_text(explain_estimate(in, *hybrid));
  EXPECT_NE(explained.find("ZeRO-3 over shard 8, 2 replicas of it (hybrid)"), std::string::npos)
      << explained;
}

TEST(MemoryEstimate, FitsAgainstCapacity) {
  EstimateInput in = input_for(testing::llama2_7b());
  in.capacity_bytes = 80e9;
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok());
  EXPECT_FALSE(e->fits());  // 16 B/param x 6.74e9 = 108 GB of states alone
  in.layout.dp = 8;
  in.layout.zero = 3;
  in.layout.recompute = Recompute::kFull;
  e = estimate_memory(in);
  EXPECT_TRUE(e->fits());
  EXPECT_GT(e->headroom(), 0);
}

TEST(MemoryEstimate, DefaultReserveIsItsOwnLine) {
  EstimateInput in = input_for(testing::llama2_7b());
  in.reserve_bytes.reset();
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok());
  const StageMemory& s = e->heaviest_stage();
  EXPECT_DOUBLE_EQ(s.reserve, default_reserve(s.total() - s.reserve).total());
  EXPECT_GT(s.reserve, 1024.0 * 1024 * 1024);
}

TEST(MemoryEstimate, InferenceIsWeightsAndKvCache) {
  EstimateInput in = input_for(testing::llama2_7b());
  in.inference = true;
  in.kv_len = 4000;
  in.gen_len = 96;
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const StageMemory& s = e->heaviest_stage();
  EXPECT_DOUBLE_EQ(s.params, 2 * 6738415616.0);
  EXPECT_DOUBLE_EQ(s.kv_cache, 2.0 * 1024 * 1024 * 1024);  // 0.5 MiB x 4096 tokens
  EXPECT_DOUBLE_EQ(s.grads + s.optimizer, 0);
}

TEST(MemoryEstimate, ExplainCitesSources) {
  EstimateInput in = input_for(testing::gpt3_175b());
  in.layout.pp = 2;
  auto e = estimate_memory(in);
  ASSERT_TRUE(e.is_ok());
  auto lines = explain_estimate(in, *e);
  ASSERT_GE(lines.size(), 6u);
  for (const auto& line : lines) EXPECT_FALSE(line.source.empty()) << line.quantity;
}

// The per-layer line writes its symbols for what a rank holds: s without context parallelism,
// s/c (and the scores' (s/c) x s) with it, the sequence it divides given beside.
TEST(MemoryEstimate, ExplainNamesTheContextParallelShareOfTheSequence) {
  for (const int cp : {1, 2}) {
    EstimateInput in = input_for(testing::llama2_7b());
    in.layout.cp = cp;
    auto e = estimate_memory(in);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    const auto lines = explain_estimate(in, *e);
    const auto per_layer = std::find_if(lines.begin(), lines.end(), [](const ExplainLine& line) {
      return line.quantity == "activations per layer";
    });
    ASSERT_NE(per_layer, lines.end());
    const std::string seq = std::to_string(in.layout.seq.value_or(in.model.seq));
    if (cp == 1) {
      EXPECT_EQ(per_layer->formula.rfind("s b h x ", 0), 0u) << per_layer->formula;
      EXPECT_NE(per_layer->formula.find("a s^2 b x "), std::string::npos) << per_layer->formula;
      EXPECT_NE(per_layer->formula.find("(s " + seq + ", b "), std::string::npos)
          << per_layer->formula;
    } else {
      EXPECT_EQ(per_layer->formula.rfind("(s/c) b h x ", 0), 0u) << per_layer->formula;
      EXPECT_NE(per_layer->formula.find("a (s/c) s b x "), std::string::npos) << per_layer->formula;
      EXPECT_NE(per_layer->formula.find("(s " + seq + ", c 2: s/c " +
                                        std::to_string(std::stoi(seq) / 2) + ", b "),
                std::string::npos)
          << per_layer->formula;
    }
  }
}

TEST(MemoryEstimate, SweepCoversDpZeroAndRecompute) {
  EstimateInput in = input_for(testing::llama2_7b());
  auto report = sweep_memory(in, {1, 2, 4, 8});
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->rows.size(), 4u * 4 * 3);
  EXPECT_GT(report->flops_per_token_recompute, report->flops_per_token);
}

// --global-batch given: every row keeps it, and a dp it does not divide is left out and named,
// as `memory --dp 3 --global-batch 64` refuses it (the sweep had tabulated dp 3 at 192).
TEST(MemoryEstimate, SweepKeepsAGivenGlobalBatch) {
  EstimateInput in = input_for(testing::llama2_7b());
  in.layout.global_batch = 64;
  auto report = sweep_memory(in, {1, 2, 3, 4});
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->rows.size(), 3u * 4 * 3);
  EXPECT_EQ(report->dp_left_out, std::vector<int>{3});
  for (const SweepRow& row : report->rows) EXPECT_NE(row.dp, 3);
  const std::string text = format_sweep_text(*report, {"llama-2-7b", "h100-80g"});
  EXPECT_NE(text.find("dp 3 left out: the global batch of 64 is not a multiple of dp x "
                      "micro-batch"),
            std::string::npos)
      << text;
  const auto json = nlohmann::json::parse(format_sweep_json(*report, {"llama-2-7b", "h100-80g"}));
  EXPECT_EQ(json["global_batch"], 64);
  EXPECT_EQ(json["dp_left_out"], nlohmann::json::array({3}));
  // Without it, the micro-batch count per step is kept and nothing is left out.
  in.layout.global_batch.reset();
  report = sweep_memory(in, {1, 2, 3, 4});
  ASSERT_TRUE(report.is_ok());
  EXPECT_TRUE(report->dp_left_out.empty());
  EXPECT_EQ(report->rows.size(), 4u * 4 * 3);
}

}  // namespace
}  // namespace partrain::memory
