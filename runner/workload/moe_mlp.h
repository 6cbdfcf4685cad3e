// A mixture-of-experts MLP in place of a GPT block's dense one (GShard, Lepikhin 2020; Switch,
// Fedus 2021; Mixtral; DeepSeekMoE's shared experts): the router's logits (a replicated C -> E
// linear layer), the routing (moe_router.h: top-k, Mixtral's gates, the capacity and the
// load-balancing loss over the whole micro-batch of every data-parallel rank), the token
// exchange with the ranks holding the experts (expert_dispatch.h), the experts' GeLU MLPs, the
// exchange back and the gated sum, plus the shared experts every token uses. Under tensor
// parallelism each tp rank routes the same tokens and holds its column / row slice of every
// expert, so the output is a partial sum over tp like the dense MLP's. The routing and the
// exchanges go through the host (downloads and uploads); the GEMMs and GeLU are device ops.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/workload/expert_dispatch.h"
#include "runner/workload/expert_load.h"
#include "runner/workload/moe_router.h"
#include "runner/workload/moe_specs.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/unit_params.h"

namespace partrain::runner {

struct MoeOptions {
  int64_t hidden = 1;
  int experts = 1;
  int top_k = 1;
  int64_t expert_ffn = 1;  // global; each tp rank holds expert_ffn / tp of every expert
  int shared_experts = 0;
  double capacity_factor = 0;  // 0: dropless
  // The load-balancing loss's weight per micro-batch: the coefficient over the step's
  // micro-batches (the objective is the mean of the micro-batches' losses).
  double aux_weight = 0;
};

// Where an MoE block's parameters sit: unit-local offsets in the block's unit (router, shared
// experts) and in its experts' unit (this rank's routed experts, in order).
struct MoeOffsets {
  int layer = 0;
  int64_t router = 0;
  std::vector<std::array<int64_t, kExpertParams>> shared;
  std::vector<std::array<int64_t, kExpertParams>> routed;
};

// An MoE block's acquired parameters, as the ops read them.
struct MoeWeights {
  const UnitParams* block = nullptr;
  const UnitParams* experts = nullptr;
  const MoeOffsets* offsets = nullptr;
};

// What the MoE MLP keeps from a micro-batch's forward for its backward.
struct MoeActivations {
  Routing routing;
  RouterStatistics statistics;
  DispatchPlan plan;
  Tensor expert_in, expert_fc, expert_act;  // the received rows (peers x block), in, fc, GeLU
  std::vector<float> expert_out;            // host: each sent row's expert output, as it came back
  std::vector<Tensor> shared_fc, shared_act;
  ExpertLayerLoad load;  // this micro-batch's
};

class MoeMlp {
 public:
  // `ep`: the expert-parallel group; `data`: the ranks that split the micro-batch (dp), over
  // which the routing statistics are gathered. Both may be communicators of one rank.
  MoeMlp(Device& device, TensorParallel& tp, comm::Comm& ep, comm::Comm& data, MoeOptions options)
      : device_(device),
        tp_(tp),
        ep_(ep),
        data_(data),
        ep_values_(device, ep),
        data_values_(device, data),
        options_(options) {}

  // in: the N tokens' region input (N x C, fp32); writes `partial` (N x C), this tp rank's
  // partial sum of the routed and shared experts' outputs.
  Status forward(const MoeWeights& w, Matrix in, int64_t N, float* partial, MoeActivations& acts);
  // d_out: the output's gradient (N x C, full over tp); adds this tp rank's partial input
  // gradient into d_in (N x C) and the parameters' gradients.
  Status backward(const MoeWeights& w, Matrix in, int64_t N, const float* d_out, float* d_in,
                  MoeActivations& acts);

  // Adds a micro-batch's load to the step's (the forward's, not a recompute's).
  void record(const MoeActivations& acts);
  // The step's loads, one per MoE layer of the chunk, in layer order; clears them.
  std::vector<ExpertLayerLoad> take_loads();

 private:
  StatusOr<Tensor> zeros(std::vector<int64_t> shape, memory::Category category);
  Status route(const MoeWeights& w, Matrix in, int64_t N, MoeActivations& acts);
  Status run_experts(const MoeWeights& w, const std::vector<float>& sent, MoeActivations& acts,
                     std::vector<float>& returned);
  Status shared_forward(const MoeWeights& w, Matrix in, int64_t N, float* partial,
                        MoeActivations& acts);
  StatusOr<std::vector<float>> gate_backward(const std::vector<float>& d_tokens,
                                             const MoeActivations& acts,
                                             std::vector<float>& d_sent);
  Status experts_backward(const MoeWeights& w, const std::vector<float>& d_sent,
                          MoeActivations& acts, std::vector<float>& d_returned);
  Status shared_backward(const MoeWeights& w, Matrix in, int64_t N, const float* d_out, float* d_in,
                         const MoeActivations& acts);

  Device& device_;
  TensorParallel& tp_;
  comm::Comm& ep_;
  comm::Comm& data_;
  comm::HostValueCollectives ep_values_;
  comm::HostValueCollectives data_values_;
  MoeOptions options_;
  std::map<int, ExpertLayerLoad> loads_;
  std::map<int, int> recorded_;  // micro-batches per layer, for the mean aux loss
};

}  // namespace partrain::runner
