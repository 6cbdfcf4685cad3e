#include "runner/workload/moe_mlp.h"

#include <algorithm>

#include "runner/comm/recording_comm.h"

namespace partrain::runner {

using memory::Category;

StatusOr<Tensor> MoeMlp::zeros(std::vector<int64_t> shape, Category category) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape), category));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

// Logits, routing, the statistics over the data-parallel ranks, the capacity, the plan.
Status MoeMlp::route(const MoeWeights& w, Matrix in, int64_t N, MoeActivations& a) {
  const int E = options_.experts;
  ASSIGN_OR_RETURN(Tensor logits, zeros({N, E}, Category::kWorkspace));
  device_.matmul_forward(logits.data(), in, w.block->matrix(w.offsets->router), nullptr, N,
                         options_.hidden, E);
  std::vector<float> host(static_cast<size_t>(N * E));
  device_.download(host.data(), logits.data(), host.size() * sizeof(float));
  a.routing = route_tokens(host.data(), N, E, options_.top_k);
  const std::vector<float> counts = router_counts(a.routing);
  const int ranks = data_.size();
  std::vector<float> gathered(counts.size() * static_cast<size_t>(ranks));
  if (ranks > 1) {
    RETURN_IF_ERROR(
        data_values_.all_gather(counts.data(), gathered.data(), counts.size(), comm::DType::kF32));
  } else {
    gathered = counts;
  }
  a.statistics = router_statistics(gathered, ranks, data_.rank(), E, options_.top_k, N,
                                   options_.capacity_factor);
  apply_capacity(a.statistics, a.routing);
  a.load.tokens_per_expert = a.statistics.tokens_per_expert;
  a.load.dropped_tokens = 0;
  if (a.statistics.capacity > 0) {
    for (int64_t routed : a.statistics.tokens_per_expert) {
      a.load.dropped_tokens += std::max<int64_t>(0, routed - a.statistics.capacity);
    }
  }
  a.load.aux_loss = a.statistics.aux_loss;
  a.load.layer = w.offsets->layer;
  ASSIGN_OR_RETURN(a.plan, plan_dispatch(ep_values_, ep_.size(), ep_.rank(), a.routing));
  return Status::ok();
}

// The local experts on the received rows: in -> fc -> GeLU -> proj, segment by segment (the rows
// of one expert from one peer are contiguous); `returned` gets the outputs back in `sent`'s rows.
Status MoeMlp::run_experts(const MoeWeights& w, const std::vector<float>& sent, MoeActivations& a,
                           std::vector<float>& returned) {
  const int64_t C = options_.hidden;
  const int64_t F = options_.expert_ffn / tp_.size();
  const DispatchPlan& plan = a.plan;
  const int64_t rows = plan.peers * plan.block;
  std::vector<float> received;
  {
    const comm::OpLabel label(ep_, "moe_dispatch");  // told apart from combine in the trace
    RETURN_IF_ERROR(exchange_rows(device_, ep_, plan, C, sent, received));
  }
  ASSIGN_OR_RETURN(a.expert_in, zeros({rows, C}, Category::kActivations));
  device_.upload(a.expert_in.data(), received.data(), received.size() * sizeof(float));
  ASSIGN_OR_RETURN(a.expert_fc, zeros({rows, F}, Category::kActivations));
  ASSIGN_OR_RETURN(a.expert_act, zeros({rows, F}, Category::kActivations));
  ASSIGN_OR_RETURN(Tensor out, zeros({rows, C}, Category::kWorkspace));
  plan.for_each_run([&](int e, int64_t row, int64_t n) {
    const auto& at = w.offsets->routed[static_cast<size_t>(e)];
    device_.matmul_forward(a.expert_fc.data() + row * F, a.expert_in.data() + row * C,
                           w.experts->matrix(at[kExpertFcW]), w.experts->vector(at[kExpertFcB]), n,
                           C, F);
    device_.gelu_forward(a.expert_act.data() + row * F, a.expert_fc.data() + row * F, n * F);
    // Row-parallel: only tp rank 0 adds the replicated bias to the partial sums.
    device_.matmul_forward(
        out.data() + row * C, a.expert_act.data() + row * F, w.experts->matrix(at[kExpertProjW]),
        tp_.rank() == 0 ? w.experts->vector(at[kExpertProjB]) : nullptr, n, F, C);
  });
  std::vector<float> computed(static_cast<size_t>(rows * C));
  device_.download(computed.data(), out.data(), computed.size() * sizeof(float));
  const comm::OpLabel label(ep_, "moe_combine");
  return exchange_rows(device_, ep_, plan, C, computed, returned);
}

Status MoeMlp::shared_forward(const MoeWeights& w, Matrix in, int64_t N, float* partial,
                              MoeActivations& a) {
  const int64_t C = options_.hidden;
  const int64_t F = options_.expert_ffn / tp_.size();
  ASSIGN_OR_RETURN(Tensor out, zeros({N, C}, Category::kWorkspace));
  for (const auto& at : w.offsets->shared) {
    ASSIGN_OR_RETURN(Tensor fc, zeros({N, F}, Category::kActivations));
    ASSIGN_OR_RETURN(Tensor act, zeros({N, F}, Category::kActivations));
    device_.matmul_forward(fc.data(), in, w.block->matrix(at[kExpertFcW]),
                           w.block->vector(at[kExpertFcB]), N, C, F);
    device_.gelu_forward(act.data(), fc.data(), N * F);
    device_.matmul_forward(out.data(), act.data(), w.block->matrix(at[kExpertProjW]),
                           tp_.rank() == 0 ? w.block->vector(at[kExpertProjB]) : nullptr, N, F, C);
    device_.residual_forward(partial, partial, out.data(), N * C);
    a.shared_fc.push_back(std::move(fc));
    a.shared_act.push_back(std::move(act));
  }
  return Status::ok();
}

Status MoeMlp::forward(const MoeWeights& w, Matrix in, int64_t N, float* partial,
                       MoeActivations& a) {
  const int64_t C = options_.hidden;
  const auto width = static_cast<size_t>(C);
  RETURN_IF_ERROR(route(w, in, N, a));
  std::vector<float> tokens(static_cast<size_t>(N) * width);
  device_.download(tokens.data(), in.f32, tokens.size() * sizeof(float));
  const size_t k = static_cast<size_t>(options_.top_k);
  std::vector<float> sent(a.plan.sent_choice.size() * width, 0.0f);
  for (size_t row = 0; row < a.plan.sent_choice.size(); ++row) {
    const int64_t choice = a.plan.sent_choice[row];
    if (choice < 0) continue;
    const float* token = tokens.data() + static_cast<size_t>(choice) / k * width;
    std::copy(token, token + width, sent.data() + row * width);
  }
  RETURN_IF_ERROR(run_experts(w, sent, a, a.expert_out));
  // The gated sum of each token's experts.
  std::vector<float> combined(static_cast<size_t>(N) * width, 0.0f);
  for (size_t row = 0; row < a.plan.sent_choice.size(); ++row) {
    const int64_t choice = a.plan.sent_choice[row];
    if (choice < 0) continue;
    const float gate = a.routing.gate[static_cast<size_t>(choice)];
    float* token = combined.data() + static_cast<size_t>(choice) / k * width;
    const float* y = a.expert_out.data() + row * width;
    for (size_t c = 0; c < width; ++c) token[c] += gate * y[c];
  }
  device_.upload(partial, combined.data(), combined.size() * sizeof(float));
  return shared_forward(w, in, N, partial, a);
}

// Each kept choice's dL/dy = gate x dL/dout (the rows to send back to the experts) and
// dL/dgate = dL/dout . y, summed over tp (y is this rank's partial sum).
StatusOr<std::vector<float>> MoeMlp::gate_backward(const std::vector<float>& d_tokens,
                                                   const MoeActivations& a,
                                                   std::vector<float>& d_sent) {
  const auto width = static_cast<size_t>(options_.hidden);
  const auto k = static_cast<size_t>(options_.top_k);
  const DispatchPlan& plan = a.plan;
  d_sent.assign(plan.sent_choice.size() * width, 0.0f);
  std::vector<float> d_gate(a.routing.gate.size(), 0.0f);
  for (size_t row = 0; row < plan.sent_choice.size(); ++row) {
    const int64_t choice = plan.sent_choice[row];
    if (choice < 0) continue;
    const auto c = static_cast<size_t>(choice);
    const float* d_token = d_tokens.data() + c / k * width;
    const float* y = a.expert_out.data() + row * width;
    double dot = 0;
    for (size_t i = 0; i < width; ++i) {
      d_sent[row * width + i] = a.routing.gate[c] * d_token[i];
      dot += static_cast<double>(d_token[i]) * y[i];
    }
    d_gate[c] = static_cast<float>(dot);
  }
  if (tp_.size() > 1 && !d_gate.empty()) {
    ASSIGN_OR_RETURN(Tensor summed,
                     zeros({static_cast<int64_t>(d_gate.size())}, Category::kWorkspace));
    device_.upload(summed.data(), d_gate.data(), d_gate.size() * sizeof(float));
    RETURN_IF_ERROR(tp_.all_reduce(summed.data(), summed.numel()));
    device_.download(d_gate.data(), summed.data(), d_gate.size() * sizeof(float));
  }
  return d_gate;
}

// The local experts' backward on the received rows' gradients; `d_returned` gets the input
// gradients back in `d_sent`'s rows.
Status MoeMlp::experts_backward(const MoeWeights& w, const std::vector<float>& d_sent,
                                MoeActivations& a, std::vector<float>& d_returned) {
  const int64_t C = options_.hidden;
  const int64_t F = options_.expert_ffn / tp_.size();
  const DispatchPlan& plan = a.plan;
  const int64_t rows = plan.peers * plan.block;
  std::vector<float> d_received;
  {
    const comm::OpLabel label(ep_, "moe_combine_grad");
    RETURN_IF_ERROR(exchange_rows(device_, ep_, plan, C, d_sent, d_received));
  }
  ASSIGN_OR_RETURN(Tensor d_y, zeros({rows, C}, Category::kWorkspace));
  device_.upload(d_y.data(), d_received.data(), d_received.size() * sizeof(float));
  ASSIGN_OR_RETURN(Tensor d_act, zeros({rows, F}, Category::kWorkspace));
  ASSIGN_OR_RETURN(Tensor d_fc, zeros({rows, F}, Category::kWorkspace));
  ASSIGN_OR_RETURN(Tensor d_x, zeros({rows, C}, Category::kWorkspace));
  plan.for_each_run([&](int e, int64_t row, int64_t n) {
    const auto& at = w.offsets->routed[static_cast<size_t>(e)];
    device_.matmul_backward(d_act.data() + row * F, w.experts->matrix_grad(at[kExpertProjW]),
                            w.experts->grad(at[kExpertProjB]), d_y.data() + row * C,
                            a.expert_act.data() + row * F, w.experts->matrix(at[kExpertProjW]), n,
                            F, C);
    device_.gelu_backward(d_fc.data() + row * F, a.expert_fc.data() + row * F,
                          d_act.data() + row * F, n * F);
    device_.matmul_backward(d_x.data() + row * C, w.experts->matrix_grad(at[kExpertFcW]),
                            w.experts->grad(at[kExpertFcB]), d_fc.data() + row * F,
                            a.expert_in.data() + row * C, w.experts->matrix(at[kExpertFcW]), n, C,
                            F);
  });
  std::vector<float> d_computed(static_cast<size_t>(rows * C));
  device_.download(d_computed.data(), d_x.data(), d_computed.size() * sizeof(float));
  const comm::OpLabel label(ep_, "moe_dispatch_grad");
  return exchange_rows(device_, ep_, plan, C, d_computed, d_returned);
}

Status MoeMlp::shared_backward(const MoeWeights& w, Matrix in, int64_t N, const float* d_out,
                               float* d_in, const MoeActivations& a) {
  const int64_t C = options_.hidden;
  const int64_t F = options_.expert_ffn / tp_.size();
  for (size_t s = 0; s < w.offsets->shared.size(); ++s) {
    const auto& at = w.offsets->shared[s];
    ASSIGN_OR_RETURN(Tensor d_act, zeros({N, F}, Category::kWorkspace));
    ASSIGN_OR_RETURN(Tensor d_fc, zeros({N, F}, Category::kWorkspace));
    device_.matmul_backward(d_act.data(), w.block->matrix_grad(at[kExpertProjW]),
                            w.block->grad(at[kExpertProjB]), d_out, a.shared_act[s].data(),
                            w.block->matrix(at[kExpertProjW]), N, F, C);
    device_.gelu_backward(d_fc.data(), a.shared_fc[s].data(), d_act.data(), N * F);
    device_.matmul_backward(d_in, w.block->matrix_grad(at[kExpertFcW]),
                            w.block->grad(at[kExpertFcB]), d_fc.data(), in,
                            w.block->matrix(at[kExpertFcW]), N, C, F);
  }
  return Status::ok();
}

Status MoeMlp::backward(const MoeWeights& w, Matrix in, int64_t N, const float* d_out, float* d_in,
                        MoeActivations& a) {
  const int64_t C = options_.hidden;
  const auto width = static_cast<size_t>(C);
  const auto k = static_cast<size_t>(options_.top_k);
  std::vector<float> d_tokens(static_cast<size_t>(N) * width);
  device_.download(d_tokens.data(), d_out, d_tokens.size() * sizeof(float));
  std::vector<float> d_sent, d_returned;
  ASSIGN_OR_RETURN(const std::vector<float> d_gate, gate_backward(d_tokens, a, d_sent));
  RETURN_IF_ERROR(experts_backward(w, d_sent, a, d_returned));
  // Each token's input gradient: the sum over its experts' rows.
  std::vector<float> d_input(static_cast<size_t>(N) * width, 0.0f);
  for (size_t row = 0; row < a.plan.sent_choice.size(); ++row) {
    const int64_t choice = a.plan.sent_choice[row];
    if (choice < 0) continue;
    float* d_token = d_input.data() + static_cast<size_t>(choice) / k * width;
    const float* d_row = d_returned.data() + row * width;
    for (size_t i = 0; i < width; ++i) d_token[i] += d_row[i];
  }
  ASSIGN_OR_RETURN(Tensor routed, zeros({N, C}, Category::kWorkspace));
  device_.upload(routed.data(), d_input.data(), d_input.size() * sizeof(float));
  device_.residual_forward(d_in, d_in, routed.data(), N * C);
  // The router: identical on every tp rank (the gates' gradients are summed over tp), so its
  // input gradient is added by tp rank 0 alone, the others' being summed with it.
  const int E = options_.experts;
  std::vector<float> d_logits(static_cast<size_t>(N * E));
  router_backward(a.routing, a.statistics, d_gate, options_.aux_weight, d_logits.data());
  ASSIGN_OR_RETURN(Tensor d_logits_device, zeros({N, E}, Category::kWorkspace));
  device_.upload(d_logits_device.data(), d_logits.data(), d_logits.size() * sizeof(float));
  device_.matmul_backward(tp_.rank() == 0 ? d_in : nullptr, w.block->matrix_grad(w.offsets->router),
                          nullptr, d_logits_device.data(), in, w.block->matrix(w.offsets->router),
                          N, C, E);
  RETURN_IF_ERROR(shared_backward(w, in, N, d_out, d_in, a));
  a = MoeActivations();
  return Status::ok();
}

void MoeMlp::record(const MoeActivations& a) {
  accumulate_load(loads_[a.load.layer], a.load, recorded_[a.load.layer]++);
}

std::vector<ExpertLayerLoad> MoeMlp::take_loads() {
  std::vector<ExpertLayerLoad> loads;
  for (auto& [layer, load] : loads_) loads.push_back(std::move(load));
  loads_.clear();
  recorded_.clear();
  return loads;
}

}  // namespace partrain::runner
