// The recommender's cost terms against hand-computed values: alpha-beta collectives with the
// nccl-tests factors, roofline GEMMs, a block's forward/backward, and each term of a step.
#include <gtest/gtest.h>

#include "analyzers/collective_cost.h"
#include "analyzers/compute_cost.h"
#include "analyzers/step_cost.h"
#include "memory/flops.h"
#include "memory/pipeline.h"
#include "tests/unit/analyzers/step_cost_fixture.h"

namespace partrain::analyzers {
namespace {

TEST(CollectiveCost, AllReduceIsLatencyStepsPlusBusFactorOverBandwidth) {
  CollectiveCost cost(test_machines());
  // 8 ranks: ceil(log2 8) = 3, all-reduce 2 x 3 steps of 2 us; 1 GB x 2(7)/8 at 100 GB/s.
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 8, LinkLevel::kIntraNode),
              6 * 2e-6 + 1e9 * 1.75 / 100e9, 1e-12);
  // All-gather of the whole 1 GB over 8: 3 steps, (n-1)/n.
  EXPECT_NEAR(cost.seconds(CostedOp::kAllGather, 1e9, 8, LinkLevel::kIntraNode),
              3 * 2e-6 + 1e9 * 0.875 / 100e9, 1e-12);
  // Across nodes: the NIC's 10 GB/s and 10 us; 5 ranks need ceil(log2 5) = 3 steps.
  EXPECT_NEAR(cost.seconds(CostedOp::kReduceScatter, 1e9, 5, LinkLevel::kInterNode),
              3 * 10e-6 + 1e9 * 0.8 / 10e9, 1e-12);
  EXPECT_NEAR(cost.seconds(CostedOp::kSendRecv, 1e6, 2, LinkLevel::kInterNode), 10e-6 + 1e6 / 10e9,
              1e-15);
  EXPECT_EQ(cost.seconds(CostedOp::kAllReduce, 1e9, 1, LinkLevel::kIntraNode), 0);
}

TEST(CollectiveCost, CalibratedLinkReplacesThePresetForThatOpAndLevelOnly) {
  CollectiveCost cost(test_machines());
  cost.calibrate(CostedOp::kAllReduce, LinkLevel::kIntraNode, 2, {50e9, 0});
  EXPECT_TRUE(cost.is_calibrated(CostedOp::kAllReduce, LinkLevel::kIntraNode));
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 2, LinkLevel::kIntraNode), 1e9 / 50e9, 1e-12);
  // The only measured group size serves every group; a second one serves the groups nearer it.
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 8, LinkLevel::kIntraNode), 1e9 * 1.75 / 50e9,
              1e-12);
  cost.calibrate(CostedOp::kAllReduce, LinkLevel::kIntraNode, 8, {25e9, 1e-3});
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 16, LinkLevel::kIntraNode),
              8 * 1e-3 + 1e9 * 1.875 / 25e9, 1e-12);
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 2, LinkLevel::kIntraNode), 1e9 / 50e9, 1e-12);
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 4, LinkLevel::kIntraNode),  // tie: larger
              4 * 1e-3 + 1e9 * 1.5 / 25e9, 1e-12);
  EXPECT_NEAR(cost.seconds(CostedOp::kAllGather, 1e9, 2, LinkLevel::kIntraNode),
              2e-6 + 0.5e9 / 100e9, 1e-12);
  EXPECT_NEAR(cost.seconds(CostedOp::kAllReduce, 1e9, 2, LinkLevel::kInterNode),
              2 * 10e-6 + 1e9 / 10e9, 1e-12);
}

TEST(Machines, GroupStaysInANodeWhileItSpansAtMostGpusPerNode) {
  const Machines m = test_machines();
  EXPECT_EQ(m.level_of_group(8, 1), LinkLevel::kIntraNode);   // tp 8
  EXPECT_EQ(m.level_of_group(16, 1), LinkLevel::kInterNode);  // tp 16
  EXPECT_EQ(m.level_of_group(2, 4), LinkLevel::kIntraNode);   // dp 2 over tp 4
  EXPECT_EQ(m.level_of_group(2, 8), LinkLevel::kInterNode);   // dp 2 over tp 8
}

// tp 3 on 8 GPUs a node: ranks 6-8 straddle two nodes, so the group runs at the NIC's pace.
TEST(Machines, GroupsThatDoNotTileANodeStraddleNodes) {
  const Machines m = test_machines();
  EXPECT_EQ(m.level_of_group(3, 1), LinkLevel::kInterNode);
  EXPECT_EQ(m.level_of_group(6, 1), LinkLevel::kInterNode);
  EXPECT_EQ(m.level_of_group(4, 2), LinkLevel::kIntraNode);
  EXPECT_EQ(m.level_of_group(3, 2), LinkLevel::kInterNode);
}

TEST(ModelConfig, MegatronPadsTheVocabularyToAMultipleOf128TimesTp) {
  EXPECT_EQ(memory::megatron_padded_vocab(50257, 1), 50304);
  EXPECT_EQ(memory::megatron_padded_vocab(50257, 8), 51200);
  EXPECT_EQ(memory::megatron_padded_vocab(51200, 8), 51200);
  EXPECT_EQ(memory::megatron_padded_vocab(128256, 8), 129024);
}

TEST(ComputeCost, WavesOfTilesLeaveSmsIdleWhenTheTilesDoNotFillTheLastWave) {
  EXPECT_EQ(wave_efficiency(1024, 1024, 1, 0), 1);                     // not modelled
  EXPECT_NEAR(wave_efficiency(1024, 1024, 1, 64), 1, 1e-12);           // 64 tiles, one full wave
  EXPECT_NEAR(wave_efficiency(1024, 1152, 1, 64), 72.0 / 128, 1e-12);  // 72 tiles, 2 waves
  EXPECT_NEAR(wave_efficiency(64, 128, 1, 1), 0.5, 1e-12);             // half a tile's rows
  ComputeSpeed speed{1e15, 0.5, 1e300, 0, 1, 1, 64};
  EXPECT_NEAR(gemm_seconds(1024, 1152, 1024, 1, 2, speed),
              2.0 * 1024 * 1152 * 1024 / (5e14 * 72 / 128), 1e-15);
}

// A collective beside compute holds its SMs: 756 tiles fill 7 waves of 108 SMs and 9 of 84, so
// a GEMM takes 108/84 as long while 24 SMs communicate.
TEST(ComputeCost, ACollectiveBesideAGemmTakesItsSmsFromTheWaves) {
  ComputeSpeed speed{1e14, 0.5, 1e300, 0, 1};
  speed.sm_count = 108;
  speed.collective_sms = 24;
  const ComputeSpeed beside = contended(speed);
  EXPECT_EQ(beside.sm_count, 84);
  EXPECT_NEAR(beside.peak_flops, 1e14 * 84 / 108, 1);
  const double alone = gemm_seconds(27 * 128, 28 * 128, 4096, 1, 2, speed);
  EXPECT_NEAR(gemm_seconds(27 * 128, 28 * 128, 4096, 1, 2, beside) / alone, 108.0 / 84, 1e-12);
  speed.collective_sms = 0;
  EXPECT_EQ(gemm_seconds(27 * 128, 28 * 128, 4096, 1, 2, contended(speed)), alone);
}

TEST(Machines, ClusterFileOverridesThePresetAndTheFlagOverridesTheFile) {
  memory::GpuSpec gpu;
  gpu.name = "h100";
  gpu.intra_node_bandwidth = 450e9;
  gpu.network_bandwidth = 50e9;
  const Machines preset = machines_from(gpu, 64, 0, nullptr);
  EXPECT_EQ(preset.gpus_per_node, 8);
  EXPECT_EQ(preset.intra_node.bandwidth, 450e9);
  EXPECT_EQ(preset.inter_node.bandwidth, 50e9);
  memory::ClusterSpec cluster;
  cluster.name = "lab";
  cluster.gpus_per_node = 4;
  cluster.inter_node_bandwidth = 12.5e9;
  cluster.inter_node_latency_s = 20e-6;
  const Machines lab = machines_from(gpu, 64, 0, &cluster);
  EXPECT_EQ(lab.gpus_per_node, 4);
  EXPECT_EQ(lab.intra_node.bandwidth, 450e9);
  EXPECT_EQ(lab.inter_node.bandwidth, 12.5e9);
  EXPECT_EQ(lab.inter_node.latency_s, 20e-6);
  EXPECT_EQ(machines_from(gpu, 64, 2, &cluster).gpus_per_node, 2);
}

TEST(ComputeCost, GemmIsComputeBoundWhenLargeAndMemoryBoundWhenThin) {
  ComputeSpeed speed{1e15, 0.5, 2e12, 5e-6, 1};
  const double n = 4096;
  EXPECT_NEAR(gemm_seconds(n, n, n, 1, 2, speed), 2 * n * n * n / 5e14 + 5e-6, 1e-12);
  // A matrix-vector product: 2 x 4096^2 FLOPs are nothing, the 4096^2 x 2-byte weights are not.
  EXPECT_NEAR(gemm_seconds(1, n, n, 1, 2, speed), (n + n * n + n) * 2 / 2e12 + 5e-6, 1e-12);
  speed.scale = 3;
  EXPECT_NEAR(gemm_seconds(n, n, n, 1, 2, speed), 3 * (2 * n * n * n / 5e14 + 5e-6), 1e-12);
}

// With unlimited memory bandwidth and no kernel overhead, a GPT block's forward is its
// Narayanan FLOPs (24 b s h^2 + 4 b s^2 h) at the capped peak, split by t.
TEST(ComputeCost, BlockForwardIsItsFlopsAtTheCappedPeakAndBackwardTwice) {
  const memory::ModelConfig model = memory::gpt_model(4, 1024, 16, 1000, 512);
  const ComputeSpeed speed{1e14, 0.8, 1e300, 0, 1};
  const double b = 2, s = 512, h = 1024;
  for (int tp : {1, 2, 4}) {
    const BlockTimes t =
        block_times(model, {.micro_batch = b, .seq = s, .tp = tp, .element_bytes = 2}, speed);
    const double flops = (24 * b * s * h * h + 4 * b * s * s * h) / tp;
    EXPECT_NEAR(t.forward_s, flops / 8e13, 1e-12) << "tp " << tp;
    EXPECT_NEAR(t.backward_s, 2 * t.forward_s, 1e-12);
    EXPECT_NEAR(t.attention_core_s, 4 * b * s * s * h / tp / 8e13, 1e-12);
    EXPECT_EQ(t.recompute_s(memory::Recompute::kFull), t.forward_s);
    EXPECT_EQ(t.recompute_s(memory::Recompute::kSelective), t.attention_core_s);
    EXPECT_EQ(t.recompute_s(memory::Recompute::kNone), 0);
  }
  // The head: 2 b s h V forward, twice that backward.
  EXPECT_NEAR(head_seconds(model, {.micro_batch = b, .seq = s, .element_bytes = 2}, speed),
              3 * 2 * b * s * h * 1000 / 8e13, 1e-12);
}

// Heads of their own width (Gemma, the small Qwen3s): the QKV and attention-out GEMMs and the
// core compute with heads x head_dim, not hidden. Forward per layer 8 b s h q (QKV, out) +
// 16 b s h^2 (the 4h MLP) + 4 b s^2 q at q = 16 x 128 = 2 h.
TEST(ComputeCost, HeadsOfTheirOwnWidthCostThatWidth) {
  memory::ModelConfig model = memory::gpt_model(4, 1024, 16, 1000, 512);
  model.explicit_head_dim = 128;
  const ComputeSpeed speed{1e14, 0.8, 1e300, 0, 1};
  const double b = 2, s = 512, h = 1024, q = 2048;
  for (int tp : {1, 2}) {
    const BlockTimes t =
        block_times(model, {.micro_batch = b, .seq = s, .tp = tp, .element_bytes = 2}, speed);
    const double flops = (8 * b * s * h * q + 16 * b * s * h * h + 4 * b * s * s * q) / tp;
    EXPECT_NEAR(t.forward_s, flops / 8e13, 1e-12) << "tp " << tp;
    EXPECT_NEAR(t.attention_core_s, 4 * b * s * s * q / tp / 8e13, 1e-12);
  }
}

// Megatron's materialised attention where the scores' traffic sets the pace (a long sequence, a
// small head): per score element the forward moves 2 (QK^T writes) + 4 (softmax reads, writes)
// + 5 (dropout reads, writes, its mask) + 2 (AV reads) bytes at 16 bits; the backward 2 (dP
// written) + 3 x 2 (dV, dQ, dK read it) + 5 (dropout's backward) + 6 (softmax's: the gradient
// and the probabilities read, dS written): 19 to 13, not twice.
TEST(ComputeCost, MaterialisedAttentionBackwardIsCostedKernelByKernel) {
  const memory::ModelConfig model = memory::gpt_model(1, 64, 1, 1000, 4096);
  const ComputeSpeed speed{1e30, 1, 1e12, 0, 1};
  const double s = 4096, d = 64, e = 2;
  const BlockTimes t = block_times(
      model, {.micro_batch = 1, .seq = s, .tp = 1, .dropout = 0.1, .element_bytes = e}, speed);
  const double product = (s * s + 2 * s * d) * e / 1e12;  // one s x s operand or result
  EXPECT_NEAR(t.attention_core_s, 2 * product + s * s * (2 * e + 2 * e + 1) / 1e12, 1e-15);
  EXPECT_NEAR(t.parts.attention_core_backward_s, 4 * product + s * s * (3 * e + 2 * e + 1) / 1e12,
              1e-15);
  EXPECT_LT(t.parts.attention_core_backward_s, 1.6 * t.attention_core_s);
  // FlashAttention: its backward recomputes the scores, 2.5 times its forward's work.
  const BlockTimes flash = block_times(
      model, {.micro_batch = 1, .seq = s, .tp = 1, .flash_attention = true, .element_bytes = e},
      speed);
  EXPECT_NEAR(flash.parts.attention_core_backward_s, 2.5 * flash.attention_core_s, 1e-15);
}

// On a CPU core the MLP activation is paced by its scalar tanh (13 ns an element), not by its
// bytes, while the norms and residuals stay bytes-paced (issue 35 item 6: dp 2's fitted
// elementwise rate overpriced tp 2, which shards the GeLU but replicates the norms). The
// activation costs evaluations / rate forward and the same again backward (one tanh each way);
// where the bytes take longer at the preset's speeds, the kernel stays memory-bound.
TEST(ComputeCost, ASpecialFunctionPacesTheActivationWhereItOutlastsTheBytes) {
  const memory::ModelConfig model = memory::gpt_model(1, 256, 8, 512, 128);
  const double b = 2, s = 128, f = 1024, e = 4;
  ComputeSpeed bytes_paced{1e30, 1, 1e11, 0, 1};
  ComputeSpeed tanh_paced = bytes_paced;
  tanh_paced.special_function_rate = 5e7;
  for (int tp : {1, 2}) {
    const memory::ActivationSetup shape{.micro_batch = b, .seq = s, .tp = tp, .element_bytes = e};
    const BlockTimes plain = block_times(model, shape, bytes_paced);
    const BlockTimes paced = block_times(model, shape, tanh_paced);
    const double activation_bytes = b * s * f / tp * 2 * e;
    const double evaluations = b * s * f / tp;
    EXPECT_EQ(plain.parts.special_s, 0);
    EXPECT_NEAR(paced.parts.special_s, evaluations / 5e7, 1e-12) << "tp " << tp;
    // The replicated norms and residuals keep their bytes at the bandwidth on every tp rank.
    EXPECT_NEAR(paced.parts.memory_bound_s - paced.parts.special_s,
                plain.parts.memory_bound_s - activation_bytes / 1e11, 1e-12);
    EXPECT_NEAR(paced.backward_s - plain.backward_s,
                paced.parts.special_s - 2 * activation_bytes / 1e11, 1e-12);
  }
  // A special function faster than the bytes (a GPU's): memory-bound, as without one.
  ComputeSpeed fast = bytes_paced;
  fast.special_function_rate = 1e13;
  const memory::ActivationSetup shape{.micro_batch = b, .seq = s, .tp = 1, .element_bytes = e};
  EXPECT_EQ(block_times(model, shape, fast).parts.memory_bound_s,
            block_times(model, shape, bytes_paced).parts.memory_bound_s);
  EXPECT_EQ(block_times(model, shape, fast).parts.special_s, 0);
}

class StepCostTest : public ::testing::Test {
 protected:
  StepCostTest()
      : cost_{model_, bf16_recipe(), CollectiveCost(test_machines()), speed(), 1e12, false, 0} {}

  static ComputeSpeed speed() { return {1e14, 0.5, 1e300, 0, 1}; }

  memory::MemoryEstimate estimate(const memory::TrainingLayout& layout) {
    return estimate_for(model_, layout);
  }

  // One GPU a node on a NIC of `bandwidth` bytes/s, collectives beside the compute: every
  // data-parallel collective crosses nodes.
  void one_gpu_a_node(double bandwidth) {
    Machines slow = test_machines();
    slow.gpus_per_node = 1;
    slow.inter_node = {bandwidth, 10e-6};
    cost_.comm = CollectiveCost(slow);
    cost_.overlaps_communication = true;
  }

  memory::ModelConfig model_ = memory::gpt_model(8, 1024, 16, 1024, 256);
  CostModel cost_;
};

// A calibration from a trace whose steps could not be true (negative, or far too short) asks for
// a step faster than every GPU at its peak: the step is held at the peak's time, and no layout
// ever reads an MFU above 100%.
TEST_F(StepCostTest, NoStepIsFasterThanEveryGpuAtItsPeak) {
  memory::TrainingLayout l;
  l.global_batch = 8;
  cost_.step_scale = 1e-3;
  const StepCost c = step_cost(cost_, estimate(l));
  EXPECT_LE(c.mfu, 1.0);
  EXPECT_TRUE(c.held_at_peak);
  EXPECT_NEAR(c.step_s, c.model_flops / cost_.speed.peak_flops, 1e-12 * c.step_s);
  EXPECT_NEAR(c.tokens_per_s, 8.0 * 256 / c.step_s, 1e-9 * c.tokens_per_s);
}

TEST_F(StepCostTest, BubbleIsPMinusOneOverVMicroBatchTimes) {
  memory::TrainingLayout l;
  l.pp = 4;
  l.global_batch = 8;  // m = 8
  const StepCost c = step_cost(cost_, estimate(l));
  // Every stage holds 2 blocks; the last also the head, so it is the slowest: its per
  // micro-batch time is compute / m, and the bubble 3 of those.
  EXPECT_NEAR(c.bubble_s, 3 * c.compute_s / 8, 1e-12);
  l.vpp = 2;
  l.schedule = memory::PipelineSchedule::kInterleaved;
  const StepCost interleaved = step_cost(cost_, estimate(l));
  EXPECT_NEAR(interleaved.bubble_s, 1.5 * interleaved.compute_s / 8, 1e-12);
  EXPECT_NEAR(c.bubble_fraction, 3.0 / 8, 1e-12);  // as `partrain memory` reports it
  // p2p: b s h x 2 bytes per boundary, 2 (m v + p - 1) on the critical path; stage neighbours
  // are 1 rank apart, inside the node.
  const double p2p = 2e-6 + 256.0 * 1024 * 2 / 100e9;
  EXPECT_NEAR(c.pp_comm_s, 2 * (8 + 3) * p2p, 1e-12);
  EXPECT_NEAR(interleaved.pp_comm_s, 2 * (16 + 3) * p2p, 1e-12);
}

// The zero-bubble schedules' bubble is memory's, (p - 1)/(3m) with the backward split evenly in
// B and W: a third of 1F1B's, at 1F1B's compute.
TEST_F(StepCostTest, ZeroBubbleSchedulesLeaveAThirdOf1F1BsBubble) {
  memory::TrainingLayout l;
  l.pp = 4;
  l.global_batch = 8;  // m = 8
  const StepCost one_f_one_b = step_cost(cost_, estimate(l));
  for (auto schedule : {memory::PipelineSchedule::kZbH1, memory::PipelineSchedule::kDualPipeV}) {
    l.schedule = schedule;
    const StepCost c = step_cost(cost_, estimate(l));
    EXPECT_NEAR(c.bubble_fraction, 3.0 / (3 * 8), 1e-12) << memory::schedule_name(schedule);
    EXPECT_NEAR(c.bubble_fraction, memory::bubble_fraction(schedule, 4, 8, 1), 1e-15);
    EXPECT_NEAR(c.bubble_s, one_f_one_b.bubble_s / 3, 1e-9 * one_f_one_b.bubble_s);
    EXPECT_LT(c.step_s, one_f_one_b.step_s);
  }
  // DualPipe: a rank holds a stage of each direction, each direction carries half the
  // micro-batches, so a rank computes its 1F1B share of the blocks; the rank holding the last
  // stage also holds the first, so it runs the head for half the micro-batches only. Bubble
  // (p - 2)/(3m).
  l.schedule = memory::PipelineSchedule::kDualPipe;
  const StepCost dual = step_cost(cost_, estimate(l));
  const double head_s = one_f_one_b.compute_parts.head_s;
  ASSERT_GT(head_s, 0);
  EXPECT_NEAR(dual.compute_s, one_f_one_b.compute_s - head_s / 2, 1e-9 * one_f_one_b.compute_s);
  EXPECT_NEAR(dual.bubble_fraction, 2.0 / (3 * 8), 1e-12);
}

// Megatron's scatter/gather: with tp 2 and no SP each rank sends half the activation, and the
// receiving stage all-gathers it over the tp pair; DeepSpeed's engine sends all of it.
TEST_F(StepCostTest, PipelineP2pIsDividedByTpAndGatheredWithoutSp) {
  memory::TrainingLayout l;
  l.pp = 2;
  l.tp = 2;
  l.global_batch = 4;  // m = 4
  const double bytes = 256.0 * 1024 * 2;
  // Stage neighbours are 2 ranks apart: a pipeline of 2 spans 4 ranks, inside the node.
  const double send = 2e-6 + bytes / 2 / 100e9;
  const double gather = 2e-6 + bytes * 0.5 / 100e9;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).pp_comm_s, 2 * (4 + 1) * (send + gather), 1e-12);
  l.sp = true;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).pp_comm_s, 2 * (4 + 1) * send, 1e-12);
  l.sp = false;
  // DeepSpeed's engine: the same pieces, gathered the same, each send and receive blocking on its
  // own: 4 per micro-batch on a stage's path, 2 per boundary to fill and drain.
  cost_.pipeline_p2p = PipelineP2p::kDeepSpeed;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).pp_comm_s, (4 * 4 + 2 * 1) * (send + gather), 1e-12);
  // Unpartitioned: whole activations, nothing to gather.
  cost_.pipeline_p2p = PipelineP2p::kFull;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).pp_comm_s, (4 * 4 + 2 * 1) * (2e-6 + bytes / 100e9),
              1e-12);
}

// Without overlap the gradient all-reduce is all exposed; overlapped bucket by bucket, the part
// that outlasts the backward still shows.
TEST_F(StepCostTest, GradientReductionAfterBackwardIsExposedWhole) {
  cost_.overlaps_communication = true;
  cost_.overlap_grad_reduce = false;
  memory::TrainingLayout l;
  l.dp = 4;
  const memory::MemoryEstimate e = estimate(l);
  const double grads = e.stages[0].params_count * 2;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, 2 * 2 * 2e-6 + grads * 1.5 / 100e9, 1e-12);
}

// DeepSpeed's BF16_Optimizer (BLOOM) all-reduces the whole gradient before each rank updates its
// ZeRO-1 shard: twice the reduce-scatter's bytes, then the same all-gather of the weights.
TEST_F(StepCostTest, Zero1AllReduceCostsTheWholeReductionThenTheGather) {
  cost_.overlaps_communication = true;
  cost_.overlap_grad_reduce = false;
  memory::TrainingLayout l;
  l.dp = 4;
  l.zero = 1;
  const memory::MemoryEstimate e = estimate(l);
  const double params = e.stages[0].params_count;
  const double gather = 2 * 2e-6 + params * 2 * 0.75 / 100e9;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, 2 * 2e-6 + params * 2 * 0.75 / 100e9 + gather, 1e-12);
  cost_.zero1_all_reduce = true;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, 2 * 2 * 2e-6 + params * 2 * 1.5 / 100e9 + gather,
              1e-12);
}

// A hybrid over two nodes of 8 (HSDP; Megatron-LM's distributed optimizer instances): ZeRO-1's
// reduce-scatter and gather stay inside the node, and only the shard, an eighth of the gradients,
// crosses the NIC in an all-reduce between the two replicas. Sharded over all 16, both
// collectives run at the NIC's pace; the optimizer updates twice the parameters.
TEST_F(StepCostTest, HybridCrossesNodesWithItsShardsAllReduceOnly) {
  memory::TrainingLayout l;
  l.dp = 16;
  l.zero = 1;
  const memory::MemoryEstimate full = estimate(l);
  l.shard = 8;
  const memory::MemoryEstimate hybrid = estimate(l);
  const double params = full.stages[0].params_count;
  const double grads = params * 2, weights = params * 2;
  const CollectiveCost& comm = cost_.comm;
  const double inside = comm.seconds(CostedOp::kReduceScatter, grads, 8, LinkLevel::kIntraNode) +
                        comm.seconds(CostedOp::kAllReduce, grads / 8, 2, LinkLevel::kInterNode) +
                        comm.seconds(CostedOp::kAllGather, weights, 8, LinkLevel::kIntraNode);
  const double across = comm.seconds(CostedOp::kReduceScatter, grads, 16, LinkLevel::kInterNode) +
                        comm.seconds(CostedOp::kAllGather, weights, 16, LinkLevel::kInterNode);
  const StepCost h = step_cost(cost_, hybrid);
  const StepCost f = step_cost(cost_, full);
  EXPECT_NEAR(h.dp_comm_s, inside, 1e-12);
  EXPECT_NEAR(f.dp_comm_s, across, 1e-12);
  EXPECT_LT(h.dp_comm_s, f.dp_comm_s / 3);
  EXPECT_NEAR(h.optimizer_s, 2 * f.optimizer_s, 1e-12);
  // Shard groups that themselves span nodes (shard 16 of 32 ranks) gain nothing inside a node.
  l.dp = 32;
  l.shard = 16;
  const double half = estimate(l).stages[0].params_count * 2;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).dp_comm_s,
              comm.seconds(CostedOp::kReduceScatter, half, 16, LinkLevel::kInterNode) +
                  comm.seconds(CostedOp::kAllReduce, half / 16, 2, LinkLevel::kInterNode) +
                  comm.seconds(CostedOp::kAllGather, half, 16, LinkLevel::kInterNode),
              1e-12);
}

// ZeRO-3 across nodes on a slow NIC: each block's gathers outlast its compute, so the step is
// paced by the gathers and reduce-scatters, not by compute.
TEST_F(StepCostTest, Zero3IsPacedByTheSlowerOfAUnitsGathersAndItsCompute) {
  one_gpu_a_node(1e9);
  memory::TrainingLayout l;
  l.dp = 4;
  l.zero = 3;
  const memory::MemoryEstimate e = estimate(l);
  const StepCost c = step_cost(cost_, e);
  const double gather = cost_.comm.seconds(CostedOp::kAllGather, e.stages[0].params_count * 2, 4,
                                           LinkLevel::kInterNode);
  EXPECT_GT(c.dp_comm_s + c.compute_s, 2 * gather);  // forward and backward gathers at least
  EXPECT_EQ(c.bottleneck, "dp_comm");
}

// Full recompute under ZeRO-3: DeepSpeed's hooks on every submodule gather a block's weights for
// its recomputed forward and again for its backward; PyTorch FSDP, with the checkpoint inside
// the unit, gathers once for both. Paced by a slow link, the extra gather shows whole, once per
// block and micro-batch; without recompute the two are the same.
TEST_F(StepCostTest, Zero3GathersAgainForTheRecomputeOnlyWhereTheFrameworkDoes) {
  one_gpu_a_node(0.1e9);
  memory::TrainingLayout l;
  l.dp = 4;
  l.zero = 3;
  l.global_batch = 8;  // m = 2 micro-batches of 1
  l.recompute = memory::Recompute::kFull;
  const memory::MemoryEstimate e = estimate(l);
  // The unit is a block: the stage's weights over its 8 blocks (the same split step_cost makes).
  const double unit_gather = cost_.comm.seconds(CostedOp::kAllGather, e.stages[0].params_count * 2,
                                                4, LinkLevel::kInterNode) /
                             8;
  const StepCost regather = step_cost(cost_, e);
  cost_.zero3_regathers_for_recompute = false;
  const StepCost reuse = step_cost(cost_, e);
  EXPECT_EQ(reuse.bottleneck, "dp_comm");
  EXPECT_NEAR(regather.dp_comm_s - reuse.dp_comm_s, 2 * 8 * unit_gather, 1e-9 * regather.dp_comm_s);
  EXPECT_NEAR(regather.compute_s, reuse.compute_s, 1e-12);
  l.recompute = memory::Recompute::kNone;
  const memory::MemoryEstimate none = estimate(l);
  const double without = step_cost(cost_, none).dp_comm_s;
  cost_.zero3_regathers_for_recompute = true;
  EXPECT_EQ(step_cost(cost_, none).dp_comm_s, without);
}

TEST_F(StepCostTest, DataParallelWithoutOverlapPaysTheWholeGradientAllReduce) {
  memory::TrainingLayout l;
  l.dp = 4;
  const memory::MemoryEstimate e = estimate(l);
  const StepCost c = step_cost(cost_, e);
  const double grads = e.stages[0].params_count * 2;  // bf16 gradients
  EXPECT_NEAR(c.dp_comm_s, 2 * 2 * 2e-6 + grads * 1.5 / 100e9, 1e-12);
  // Megatron's optimizer step over bf16 gradients and fp32 main weights, per parameter: the
  // gradient copied to fp32 (2 + 4), its norm read (4), AdamW (2 x 12 states + 4 gradient), the
  // main weight copied to the bf16 one (4 + 2), the gradient zeroed (2): 46 bytes at 1 TB/s;
  // ZeRO-1 divides by dp.
  EXPECT_NEAR(c.optimizer_s, e.stages[0].params_count * 46 / 1e12, 1e-12);
  l.zero = 1;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).optimizer_s, e.stages[0].params_count * 46 / 4 / 1e12,
              1e-12);
}

TEST_F(StepCostTest, OverlapHidesGradientTrafficBehindBackwardButNotTheLastBucket) {
  cost_.overlaps_communication = true;
  cost_.overlap_grad_reduce = true;
  cost_.bucket_bytes = 1e6;
  memory::TrainingLayout l;
  l.dp = 4;
  l.micro_batch = 4;  // backward ~9 ms hides the ~3 ms all-reduce of 200 MB of gradients
  const StepCost c = step_cost(cost_, estimate(l));
  EXPECT_NEAR(c.dp_comm_s, 2 * 2 * 2e-6 + 1e6 * 1.5 / 100e9, 1e-12);  // only the 1 MB tail
}

// The buckets reduced beside the backward take the collective's SMs from it: the backward runs at
// the contended pace while they run, so the reduction costs (comm - tail) x (1 - b / b') beyond
// the last bucket's tail, where b' is the backward with the SMs taken. Without collective SMs
// only the tail shows.
TEST_F(StepCostTest, OverlappedReductionSlowsTheBackwardItHidesBehind) {
  cost_.overlaps_communication = true;
  cost_.overlap_grad_reduce = true;
  cost_.bucket_bytes = 1e6;
  cost_.speed.sm_count = 100;
  memory::TrainingLayout l;
  l.dp = 4;
  l.micro_batch = 4;
  const memory::MemoryEstimate e = estimate(l);
  const double tail = 2 * 2 * 2e-6 + 1e6 * 1.5 / 100e9;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, tail, 1e-12);
  // One micro-batch, no recompute, one stage: the blocks' backward and 2/3 of the head.
  auto backward_s = [&](const ComputeSpeed& speed) {
    const memory::ActivationSetup shape =
        memory::activation_setup(e.layout, cost_.recipe.activation_bytes);
    memory::ModelConfig padded = model_;
    padded.vocab = memory::megatron_padded_vocab(model_.vocab, 1);
    return static_cast<double>(model_.layers) * block_times(model_, shape, speed).backward_s +
           head_seconds(padded, shape, speed) * 2 / 3;
  };
  const double backward = backward_s(cost_.speed);
  cost_.speed.collective_sms = 20;
  const double contended_backward = backward_s(contended(cost_.speed));
  ASSERT_GT(contended_backward, backward * 1.1);  // 80 of 100 SMs, less the waves' slack
  const double grads = e.stages[0].params_count * 2;
  const double comm = 2 * 2 * 2e-6 + grads * 1.5 / 100e9;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s,
              tail + (comm - tail) * (1 - backward / contended_backward), 1e-12);
}

// Megatron-LM's defaults: the reduction after the backward and the distributed optimizer's
// gathers after its step, all exposed. --overlap-grad-reduce hides the reduce-scatter but not the
// gathers; --overlap-param-gather hides those behind the forward, bucket by bucket.
TEST_F(StepCostTest, Zero1GathersHideOnlyWithOverlapParamGather) {
  cost_.overlaps_communication = true;
  cost_.bucket_bytes = 1e6;
  memory::TrainingLayout l;
  l.dp = 4;
  l.zero = 1;
  l.micro_batch = 4;
  const memory::MemoryEstimate e = estimate(l);
  const double bytes = e.stages[0].params_count * 2;
  const double whole = 2 * 2e-6 + bytes * 0.75 / 100e9;  // one reduce-scatter or gather
  const double tail = 2 * 2e-6 + 1e6 * 0.75 / 100e9;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, 2 * whole, 1e-12);
  cost_.overlap_grad_reduce = true;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, tail + whole, 1e-12);
  cost_.overlap_param_gather = true;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, 2 * tail, 1e-12);
}

// ZeRO-3 with compute slower than its gathers: before, only the first gather and the last
// reduce-scatter showed; with the collective's SMs taken, every unit's gathers slow its compute.
TEST_F(StepCostTest, Zero3PrefetchBesideComputeSlowsEveryUnit) {
  cost_.overlaps_communication = true;
  cost_.speed.sm_count = 100;
  memory::TrainingLayout l;
  l.dp = 4;
  l.zero = 3;
  l.micro_batch = 4;
  const memory::MemoryEstimate e = estimate(l);
  const double params = e.stages[0].params_count;
  const double unit_gather =
      cost_.comm.seconds(CostedOp::kAllGather, params * 2, 4, LinkLevel::kIntraNode) / 8;
  const double unit_scatter =
      cost_.comm.seconds(CostedOp::kReduceScatter, params * 2, 4, LinkLevel::kIntraNode) / 8;
  EXPECT_NEAR(step_cost(cost_, e).dp_comm_s, unit_gather + unit_scatter, 1e-12);
  cost_.speed.collective_sms = 20;
  const double slowed = step_cost(cost_, e).dp_comm_s;
  EXPECT_GT(slowed, unit_gather + unit_scatter + 8 * 2 * unit_gather * 0.1);
  EXPECT_LT(slowed, 3 * 8 * (unit_gather + unit_scatter));  // never more than all of it
}

TEST_F(StepCostTest, TensorParallelPaysFourAllReducesPerBlockAndTheEmbeddingSum) {
  cost_.tp_backward_overlap = false;  // every collective in line (Megatron-LM 2021)
  memory::TrainingLayout l;
  l.tp = 4;
  l.global_batch = 2;  // m = 2 micro-batches of 1
  const StepCost c = step_cost(cost_, estimate(l));
  const double all_reduce = 2 * 2 * 2e-6 + 256.0 * 1024 * 2 * 1.5 / 100e9;
  EXPECT_NEAR(c.tp_comm_s, 2 * (8 * 4 + 1) * all_reduce, 1e-12);
  l.recompute = memory::Recompute::kFull;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).tp_comm_s, 2 * (8 * 6 + 1) * all_reduce, 1e-12);
  // SP: an all-gather and a reduce-scatter of the same bytes instead of each all-reduce, and
  // the backward's all-gather of each column-parallel layer's input again (2 a block).
  l.recompute = memory::Recompute::kNone;
  l.sp = true;
  const double gather = 2 * 2e-6 + 256.0 * 1024 * 2 * 0.75 / 100e9;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).tp_comm_s,
              2 * ((8 * 4 + 1) * 2 * gather + 8 * 2 * gather), 1e-12);
}

// Megatron-LM since 2022: a column-parallel layer's input-gradient all-reduce runs while its
// weight gradient is computed. On a GPU that overlaps communication the backward's two
// all-reduces a block hide behind QKV's and the MLP up projection's weight-gradient GEMMs, less
// the SMs they take; in line they are paid whole; where nothing overlaps (a CPU), in line.
TEST_F(StepCostTest, BackwardTensorParallelCollectivesHideBehindTheWeightGradients) {
  memory::TrainingLayout l;
  l.tp = 4;
  l.global_batch = 2;
  cost_.speed.sm_count = 100;
  cost_.speed.collective_sms = 20;
  cost_.tp_backward_overlap = false;
  cost_.overlaps_communication = true;
  const double in_line = step_cost(cost_, estimate(l)).tp_comm_s;
  const double all_reduce = 2 * 2 * 2e-6 + 256.0 * 1024 * 2 * 1.5 / 100e9;
  ASSERT_NEAR(in_line, 2 * (8 * 4 + 1) * all_reduce, 1e-12);
  cost_.tp_backward_overlap = true;
  const double overlapped = step_cost(cost_, estimate(l)).tp_comm_s;
  // Forward and the embedding's sum stay in line; each backward all-reduce costs at most itself
  // and at least what the contended GEMM beside it loses.
  EXPECT_LT(overlapped, in_line - 2 * 8 * 2 * all_reduce * 0.2);
  EXPECT_GE(overlapped, 2 * (8 * 2 + 1) * all_reduce - 1e-12);
  cost_.overlaps_communication = false;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).tp_comm_s, in_line, 1e-12);
}

TEST_F(StepCostTest, StepIsTheSumOfItsTermsAndMfuUsesModelFlops) {
  memory::TrainingLayout l;
  l.dp = 2;
  l.tp = 2;
  l.pp = 2;
  l.global_batch = 8;
  const StepCost c = step_cost(cost_, estimate(l));
  EXPECT_NEAR(c.step_s,
              c.compute_s + c.tp_comm_s + c.cp_comm_s + c.bubble_s + c.pp_comm_s + c.dp_comm_s +
                  c.optimizer_s,
              1e-12);
  EXPECT_EQ(c.shared_device_s, 0);  // one device per rank
  const double flops = memory::training_flops(model_, 8, 256, memory::Recompute::kNone);
  EXPECT_NEAR(c.mfu, flops / (c.step_s * 8 * 1e14), 1e-12);
  EXPECT_NEAR(c.tokens_per_s, 8 * 256 / c.step_s, 1e-6);
  EXPECT_EQ(c.bottleneck, "compute");
}

// 4 ranks on 2 devices: data parallelism computes at half speed all the time; a pipeline's
// bubble leaves devices to the other stages, so the step is the node's work over 2 devices.
TEST_F(StepCostTest, RanksSharingDevicesAreBoundByTheNodesWorkOverItsDevices) {
  Machines shared = test_machines();
  shared.gpus_per_node = 4;
  shared.devices_per_node = 2;
  cost_.comm = CollectiveCost(shared);
  memory::TrainingLayout l;
  l.dp = 4;
  const StepCost dp = step_cost(cost_, estimate(l));
  EXPECT_NEAR(dp.step_s, 2 * (dp.compute_s + dp.optimizer_s) + dp.exposed_comm_s(), 1e-12);
  EXPECT_NEAR(dp.shared_device_s, dp.compute_s + dp.optimizer_s, 1e-12);
  l = {};
  l.pp = 4;
  l.global_batch = 4;  // m = 4: bubble 3/4 of the compute
  const StepCost pp = step_cost(cost_, estimate(l));
  EXPECT_NEAR(pp.step_s, 2 * (pp.compute_s + pp.optimizer_s) + pp.exposed_comm_s(), 1e-12);
  EXPECT_NEAR(pp.bubble_s + pp.shared_device_s, pp.compute_s + pp.optimizer_s, 1e-12);
  EXPECT_EQ(shared.device_sharing(4), 2);
  EXPECT_EQ(shared.device_sharing(2), 1);
}

// A calibrated step scale of 1.25 adds a quarter of the modelled step as the "overhead" term and
// leaves every other term as it was; a scale under 1 makes the term negative.
TEST_F(StepCostTest, StepScaleAddsTheCalibratedOverheadOnTopOfTheModelledTerms) {
  memory::TrainingLayout l;
  l.dp = 2;
  l.pp = 2;
  l.global_batch = 8;
  const StepCost modelled = step_cost(cost_, estimate(l));
  EXPECT_EQ(modelled.overhead_s, 0);
  cost_.step_scale = 1.25;
  const StepCost scaled = step_cost(cost_, estimate(l));
  EXPECT_NEAR(scaled.overhead_s, 0.25 * modelled.step_s, 1e-12);
  EXPECT_NEAR(scaled.step_s, 1.25 * modelled.step_s, 1e-12);
  EXPECT_EQ(scaled.compute_s, modelled.compute_s);
  EXPECT_EQ(scaled.bubble_s, modelled.bubble_s);
  EXPECT_NEAR(scaled.tokens_per_s, modelled.tokens_per_s / 1.25, 1e-6);
  double sum = 0;
  for (const auto& [name, seconds] : cost_terms(scaled)) sum += seconds;
  EXPECT_NEAR(sum, scaled.step_s, 1e-12);
  cost_.step_scale = 0.8;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).overhead_s, -0.2 * modelled.step_s, 1e-12);
}

TEST_F(StepCostTest, TensorParallelAcrossNodesIsCommunicationBound) {
  memory::TrainingLayout l;
  l.tp = 16;
  const StepCost across = step_cost(cost_, estimate(l));
  EXPECT_EQ(across.bottleneck, "tp_comm");
  l.tp = 8;
  l.dp = 2;
  EXPECT_LT(step_cost(cost_, estimate(l)).tp_comm_s * 4, across.tp_comm_s);
}

}  // namespace
}  // namespace partrain::analyzers
