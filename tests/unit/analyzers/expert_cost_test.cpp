// A mixture of experts in the recommender's step model against hand-computed values: the
// all_to_all's bytes, link and count, the tokens each local expert computes, the experts' GEMMs
// through compute_cost's shape-aware model, and the two gradient groups.
#include "analyzers/expert_cost.h"

#include <gtest/gtest.h>

#include "analyzers/step_cost.h"
#include "memory/memory_estimate.h"
#include "memory/mesh_order.h"
#include "tests/unit/analyzers/step_cost_fixture.h"

namespace partrain::analyzers {
namespace {

// 4 blocks, the first dense; 8 experts of 512, top 2, h 1024.
memory::ModelConfig moe_model() {
  memory::ModelConfig m = memory::gpt_model(4, 1024, 16, 1024, 256);
  m.mlp = memory::MlpKind::kSwiglu;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 512;
  m.moe.dense_layers = 1;
  return m;
}

memory::ActivationSetup shape(int64_t micro_batch, int cp = 1, int tp = 1) {
  memory::ActivationSetup a;
  a.micro_batch = static_cast<double>(micro_batch);
  a.seq = 256;
  a.cp = cp;
  a.tp = tp;
  a.element_bytes = 2;
  return a;
}

memory::TrainingLayout expert_layout(int tp, int dp, int ep) {
  memory::TrainingLayout l;
  l.tp = tp;
  l.dp = dp;
  l.ep = ep;
  return l;
}

TEST(ExpertAllToAll, EachRankSendsItsTokensTopKCopiesAndKeepsOneEpTh) {
  const CollectiveCost comm(test_machines());
  memory::TrainingLayout l = expert_layout(1, 8, 4);
  const AllToAll a = expert_all_to_all(comm, moe_model(), shape(2), l);
  // b s / cp x top_k x h x 2 bytes; 3/4 of it leaves the rank, one latency step (the sends go
  // at once); ep 4 neighbours 1 rank apart: inside the node.
  const double bytes = 2.0 * 256 * 2 * 1024 * 2;
  EXPECT_DOUBLE_EQ(a.bytes, bytes);
  EXPECT_EQ(a.ranks, 4);
  EXPECT_EQ(a.level, LinkLevel::kIntraNode);
  EXPECT_NEAR(a.seconds, 2e-6 + bytes * 3 / 4 / 100e9, 1e-15);
  // Context parallelism halves the rank's tokens; a capacity factor pads every expert's slots.
  memory::ModelConfig capped = moe_model();
  capped.moe.capacity_factor = 1.25;
  l.dp = 4;
  l.cp = 2;
  EXPECT_DOUBLE_EQ(expert_all_to_all(comm, capped, shape(2, 2), l).bytes, bytes / 2 * 1.25);
}

// The ep group lies along dp x cp, tp apart (memory::expert_stride): with tp 4, ep 4 spans 16
// ranks and crosses the 8-GPU node, while ep 2 stays in it.
TEST(ExpertAllToAll, TheGroupsLinkFollowsTheRankOrder) {
  const CollectiveCost comm(test_machines());
  memory::TrainingLayout l = expert_layout(4, 4, 4);
  EXPECT_EQ(memory::expert_stride(l), 4);
  EXPECT_EQ(memory::expert_data_stride(l), 16);
  const AllToAll across = expert_all_to_all(comm, moe_model(), shape(1, 1, 4), l);
  EXPECT_EQ(across.level, LinkLevel::kInterNode);
  EXPECT_NEAR(across.seconds, 10e-6 + across.bytes * 3 / 4 / 10e9, 1e-15);
  l.ep = 2;
  EXPECT_EQ(expert_all_to_all(comm, moe_model(), shape(1, 1, 4), l).level, LinkLevel::kIntraNode);
  l.ep = 1;
  EXPECT_EQ(expert_all_to_all(comm, moe_model(), shape(1, 1, 4), l).seconds, 0);
  EXPECT_EQ(costed_op_from_trace("all_to_all"), CostedOp::kAllToAll);
}

// Megatron-Core's MoE layer with tp > 1 takes the sequence-parallel input: a rank routes and
// dispatches its 1/t of the tokens, and the MLP's all-gather and reduce-scatter over tp move the
// top_k dispatched copies instead of the tokens.
TEST(ExpertAllToAll, WithSequenceParallelismARankDispatchesItsShareAndTpGathersTheCopies) {
  const CollectiveCost comm(test_machines());
  memory::TrainingLayout l = expert_layout(2, 4, 4);
  l.sp = true;
  memory::ActivationSetup sp = shape(2, 1, 2);
  sp.sp = true;
  const double tokens = 2.0 * 256;
  EXPECT_DOUBLE_EQ(expert_all_to_all(comm, moe_model(), sp, l).bytes, tokens / 2 * 2 * 1024 * 2);
  // tp 2 inside the node: each of all-gather and reduce-scatter moves half of S over 100 GB/s;
  // the dense block's pair (S = tokens x h) is already in tp_comm, the copies add top_k - 1 of it.
  const double block = tokens * 1024 * 2;
  EXPECT_NEAR(expert_tp_exchange_seconds(comm, moe_model(), sp, l), 2 * (2 - 1) * block / 2 / 100e9,
              1e-15);
  l.sp = false;
  EXPECT_EQ(expert_tp_exchange_seconds(comm, moe_model(), shape(2, 1, 2), l), 0);
}

TEST(ExpertForward, EachLocalExpertComputesItsShareOfTheGroupsTokens) {
  const ComputeSpeed speed{1e14, 0.5, 1e300, 0, 1};
  const memory::ModelConfig m = moe_model();
  // ep 1: 512 tokens x 2 copies over 8 experts = 128 rows each, 8 experts on the rank; ep 4: the
  // 4 ranks' tokens over the same experts, 512 rows each, 2 experts on the rank.
  EXPECT_DOUBLE_EQ(tokens_per_expert(m, shape(2), 1), 128);
  EXPECT_DOUBLE_EQ(tokens_per_expert(m, shape(2), 4), 512);
  const ExpertForward one = expert_forward(m, shape(2), 1, speed);
  const ExpertForward four = expert_forward(m, shape(2), 4, speed);
  EXPECT_EQ(one.local_experts, 8);
  EXPECT_EQ(four.local_experts, 2);
  // With unbounded bandwidth and no waves every GEMM is its FLOPs at the capped peak: the same
  // routed work (3 matrices of h x f per row) however it is split; the router h x E per token.
  const double routed_flops = 2.0 * 512 * 2 * 3 * 1024 * 512;
  EXPECT_NEAR(one.routed_s, routed_flops / 5e13, 1e-12);
  EXPECT_NEAR(four.routed_s, routed_flops / 5e13, 1e-12);
  EXPECT_NEAR(one.router_s, 2.0 * 512 * 8 * 1024 / 5e13, 1e-12);
  EXPECT_EQ(one.shared_s, 0);
  // Shared experts: every token through their summed width.
  memory::ModelConfig shared = m;
  shared.moe.shared_experts = 2;
  EXPECT_NEAR(expert_forward(shared, shape(2), 1, speed).shared_s,
              2.0 * 512 * 3 * 1024 * 1024 / 5e13, 1e-12);
  EXPECT_EQ(expert_forward(memory::gpt_model(4, 1024, 16, 1024, 256), shape(2), 1, speed).total(),
            0);
}

// The local experts run as one grouped GEMM per projection, their tiles sharing the SMs' waves:
// spread thin (64 experts of 8 rows each, a 128-row tile 1/16 full) the same routed FLOPs take
// several times as long as gathered (8 experts of 64 rows) -- compute_cost's tile and wave model,
// not a constant of its own.
TEST(ExpertForward, FewerTokensPerExpertRunAtALowerEfficiency) {
  ComputeSpeed speed{1e15, 0.7, 3e12, 5e-6, 1};
  speed.sm_count = 132;
  memory::ModelConfig m = moe_model();
  m.moe.experts = 64;
  m.moe.expert_ffn = 1024;
  const ExpertForward spread = expert_forward(m, shape(1), 1, speed);
  const ExpertForward gathered = expert_forward(m, shape(1), 8, speed);
  EXPECT_DOUBLE_EQ(spread.tokens_per_expert, 8);
  EXPECT_DOUBLE_EQ(gathered.tokens_per_expert, 64);
  EXPECT_GT(spread.routed_s, 2 * gathered.routed_s);
}

class ExpertStepTest : public ::testing::Test {
 protected:
  memory::MemoryEstimate estimate(const memory::TrainingLayout& layout) {
    return estimate_for(model_, layout);
  }

  memory::ModelConfig model_ = moe_model();
  CostModel cost_{
      model_, bf16_recipe(), CollectiveCost(test_machines()), {1e14, 0.5, 1e300, 0, 1}, 1e12, false,
      0};
};

// Four all_to_alls per MoE block and micro-batch (dispatch, combine, their gradients), six when
// full recompute reruns the forward; the leading dense block has none. Not overlapped.
TEST_F(ExpertStepTest, AllToAllsAreCountedPerMoeBlockAndMicroBatchOnThePath) {
  memory::TrainingLayout l;
  l.dp = 8;
  l.ep = 8;
  l.global_batch = 32;  // m = 4
  const memory::MemoryEstimate e = estimate(l);
  const StepCost c = step_cost(cost_, e);
  const AllToAll one =
      expert_all_to_all(cost_.comm, model_, memory::activation_setup(e.layout, 2), e.layout.layout);
  ASSERT_GT(one.seconds, 0);
  EXPECT_NEAR(c.ep_comm_s, 4 * 3 * 4 * one.seconds, 1e-12);
  EXPECT_EQ(c.experts.moe_blocks, 3);
  EXPECT_EQ(c.experts.all_to_alls, 12);
  EXPECT_NEAR(c.exposed_comm_s(),
              c.tp_comm_s + c.cp_comm_s + c.pp_comm_s + c.dp_comm_s + c.ep_comm_s, 1e-15);
  double sum = 0;
  for (const auto& [name, seconds] : cost_terms(c)) sum += seconds;
  EXPECT_NEAR(sum, c.step_s, 1e-12 * c.step_s);
  const ComputeParts& p = c.compute_parts;
  EXPECT_NEAR(p.gemm_s + p.memory_bound_s + p.attention_core_s + p.head_s + p.router_s +
                  p.routed_experts_s + p.shared_experts_s,
              c.compute_s, 1e-12 * c.compute_s);
  // Three passes (forward, backward twice its work) of the experts per block and micro-batch.
  EXPECT_NEAR(p.routed_experts_s, 4 * 3 * 3 * c.experts.forward.routed_s, 1e-12);
  l.recompute = memory::Recompute::kFull;
  EXPECT_NEAR(step_cost(cost_, estimate(l)).ep_comm_s, 4 * 3 * 6 * one.seconds, 1e-12);
  l.recompute = memory::Recompute::kNone;
  l.ep = 1;
  EXPECT_EQ(step_cost(cost_, estimate(l)).ep_comm_s, 0);
}

// Where a special function paces the experts' activations (a CPU core's tanh), their backward
// evaluates it once: three passes of the rest, two of that part; full recompute adds a forward.
TEST_F(ExpertStepTest, TheExpertsSpecialFunctionPartRunsOnceBackward) {
  memory::TrainingLayout l;
  l.dp = 8;
  l.ep = 8;
  l.global_batch = 32;  // m = 4
  CostModel paced = cost_;
  paced.speed.memory_bandwidth = 1e12;
  paced.speed.special_function_rate = 1e9;
  model_.moe.shared_experts = 1;
  paced.model = model_;
  const memory::MemoryEstimate e = estimate(l);
  const ExpertForward f =
      expert_forward(model_, memory::activation_setup(e.layout, 2), 8, paced.speed);
  ASSERT_GT(f.routed_special_s, 0);
  ASSERT_GT(f.shared_special_s, 0);
  const StepCost c = step_cost(paced, e);
  const double blocks = 4 * 3;  // micro-batches x MoE blocks
  EXPECT_NEAR(c.compute_parts.routed_experts_s, blocks * (3 * f.routed_s - f.routed_special_s),
              1e-12);
  EXPECT_NEAR(c.compute_parts.shared_experts_s, blocks * (3 * f.shared_s - f.shared_special_s),
              1e-12);
  l.recompute = memory::Recompute::kFull;
  EXPECT_NEAR(step_cost(paced, estimate(l)).compute_parts.routed_experts_s,
              blocks * (4 * f.routed_s - f.routed_special_s), 1e-12);
}

// DualPipeV runs each micro-batch's all_to_all under its paired micro-batch's compute: only what
// the step's compute cannot cover stays on the path.
TEST_F(ExpertStepTest, DualPipeVHidesTheAllToAllUnderThePairedCompute) {
  memory::TrainingLayout l;
  l.dp = 4;
  l.pp = 2;
  l.ep = 4;
  l.global_batch = 32;  // m = 8 >= 2p
  const StepCost one_f_one_b = step_cost(cost_, estimate(l));
  ASSERT_GT(one_f_one_b.ep_comm_s, 0);
  EXPECT_FALSE(one_f_one_b.experts.all_to_all_overlapped);
  l.schedule = memory::PipelineSchedule::kDualPipeV;
  const StepCost dual = step_cost(cost_, estimate(l));
  EXPECT_TRUE(dual.experts.all_to_all_overlapped);
  EXPECT_NEAR(dual.ep_comm_s, std::max(0.0, one_f_one_b.ep_comm_s - dual.compute_s),
              1e-12 * one_f_one_b.ep_comm_s);
  EXPECT_LT(dual.ep_comm_s, one_f_one_b.ep_comm_s);
}

// The dense weights' gradients reduce over dp x cp, the routed experts' over the dp x cp / ep
// ranks holding the same experts (tp x ep apart): without overlap each is a whole all-reduce.
TEST_F(ExpertStepTest, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  cost_.overlaps_communication = false;
  memory::TrainingLayout l;
  l.dp = 16;
  l.ep = 4;
  const memory::MemoryEstimate e = estimate(l);
  const memory::StageMemory& s = e.stages[0];
  ASSERT_GT(s.expert_params_count, 0);
  const double dense = s.params_count - s.expert_params_count;
  // dp 16 spans both nodes; the expert-data group (4 ranks, 4 apart) does too.
  const double dense_s =
      cost_.comm.seconds(CostedOp::kAllReduce, dense * 2, 16, LinkLevel::kInterNode);
  const double experts_s =
      cost_.comm.seconds(CostedOp::kAllReduce, s.expert_params_count * 2, 4, LinkLevel::kInterNode);
  const StepCost c = step_cost(cost_, e);
  EXPECT_NEAR(c.dp_comm_s, dense_s + experts_s, 1e-12);
  EXPECT_NEAR(c.experts.dense_grad_s, dense_s, 1e-15);
  EXPECT_NEAR(c.experts.expert_grad_s, experts_s, 1e-15);
  EXPECT_EQ(c.experts.expert_data_ranks, 4);
  // ep 8 of dp 8 leaves each expert on one rank: nothing to reduce but the dense weights; with
  // ZeRO-1 the optimizer streams 1/8 of the dense states and all of the rank's experts'.
  l.ep = 8;
  l.dp = 8;
  l.zero = 1;
  const memory::MemoryEstimate alone = estimate(l);
  const StepCost c8 = step_cost(cost_, alone);
  EXPECT_EQ(c8.experts.expert_grad_s, 0);
  EXPECT_EQ(c8.experts.expert_data_ranks, 1);
  const memory::StageMemory& held = alone.stages[0];
  const memory::PrecisionRecipe r = bf16_recipe();
  // Megatron's optimizer passes over bf16 gradients: copy to fp32, norm, AdamW, copy back, zero.
  const double streamed =
      (r.grad_bytes + 4) + 4 + (2 * r.optimizer_bytes + 4) + (4 + r.param_bytes) + r.grad_bytes;
  EXPECT_NEAR(c8.optimizer_s,
              ((held.params_count - held.expert_params_count) / 8 + held.expert_params_count) *
                  streamed / 1e12,
              1e-15);
}

// A dense model gets no expert terms: ep_comm 0, the experts' parts 0, ExpertStep off.
TEST_F(ExpertStepTest, ADenseModelHasNoExpertTerms) {
  cost_.model = memory::gpt_model(4, 1024, 16, 1024, 256);
  model_ = cost_.model;
  memory::TrainingLayout l;
  l.dp = 4;
  const StepCost c = step_cost(cost_, estimate(l));
  EXPECT_FALSE(c.experts.moe);
  EXPECT_EQ(c.ep_comm_s, 0);
  EXPECT_EQ(c.compute_parts.routed_experts_s, 0);
}

}  // namespace
}  // namespace partrain::analyzers
