#include "runner/workload/gpt_chunk.h"

#include <fmt/format.h>

namespace partrain::runner {

using memory::Category;

GptChunk::GptChunk(Device& device, TensorParallel& tp, GptShape shape, Recompute recompute,
                   const ParamLayout& layout, float* params, float* grads,
                   ChunkPlacement placement)
    : device_(device),
      tp_(tp),
      shape_(shape),
      layout_(layout),
      params_(params),
      grads_(grads),
      placement_(std::move(placement)),
      block_(device, tp, shape, recompute) {
  static constexpr const char* kNames[kGptBlockParams] = {
      "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
      "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
  for (int layer : placement_.layers) {
    BlockWeights w;
    for (int i = 0; i < kGptBlockParams; ++i) {
      std::string name = fmt::format("layer{}.{}", layer, kNames[i]);
      w.param[static_cast<size_t>(i)] = param(name);
      w.grad[static_cast<size_t>(i)] = grad(name);
    }
    weights_.push_back(w);
  }
}

const float* GptChunk::param(const std::string& name) const {
  const LocalParam* p = layout_.find(name);
  return p == nullptr ? nullptr : params_ + p->offset;
}

float* GptChunk::grad(const std::string& name) const {
  const LocalParam* p = layout_.find(name);
  return p == nullptr ? nullptr : grads_ + p->offset;
}

StatusOr<Tensor> GptChunk::tensor(std::vector<int64_t> shape, Category category) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape), category));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

Status GptChunk::embed_forward(const MicroBatch& batch, float* x0) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t v_local = V / tp_.size();
  const int64_t v_start = tp_.rank() * v_local;
  ASSIGN_OR_RETURN(Tensor partial, tensor({B * T, C}, Category::kWorkspace));
  // Vocab-parallel embedding (Megatron): each rank looks up its rows of wte, the partial sums are
  // reduced; the replicated position embedding is added by one rank only.
  device_.embedding_forward_vocab_range(partial.data(), batch.tokens.data(), param("wte"),
                                        tp_.rank() == 0 ? param("wpe") : nullptr, B, T, C,
                                        v_start, v_start + v_local);
  return tp_.exit_forward(partial.data(), x0, B, T, C);
}

Status GptChunk::embed_backward(const MicroBatch& batch, const float* dx0) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t v_local = V / tp_.size();
  const int64_t v_start = tp_.rank() * v_local;
  ASSIGN_OR_RETURN(Tensor d_full, tensor({B * T, C}, Category::kWorkspace));
  RETURN_IF_ERROR(tp_.exit_backward(dx0, d_full.data(), B, T, C));
  // Every rank updates its replica of wpe from the full gradient, so the replicas stay equal.
  device_.embedding_backward_vocab_range(grad("wte"), grad("wpe"), d_full.data(),
                                         batch.tokens.data(), B, T, C, v_start,
                                         v_start + v_local);
  return Status::ok();
}

Status GptChunk::head_forward(const MicroBatch& batch, const float* x, Head& h, float* loss) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t v_local = V / tp_.size();
  ASSIGN_OR_RETURN(h.lnf, tensor({n, C}, Category::kActivations));
  ASSIGN_OR_RETURN(h.mean, tensor({n}, Category::kActivations));
  ASSIGN_OR_RETURN(h.rstd, tensor({n}, Category::kActivations));
  device_.layernorm_forward(h.lnf.data(), h.mean.data(), h.rstd.data(), x, param("lnfw"),
                            param("lnfb"), n, C);
  // Under SP the gathered input is not kept: backward gathers it again.
  Tensor gathered;
  const float* lnf_full = h.lnf.data();
  if (tp_.sequence_parallel()) {
    ASSIGN_OR_RETURN(gathered, tensor({N, C}, Category::kWorkspace));
    RETURN_IF_ERROR(tp_.enter_forward(h.lnf.data(), gathered.data(), B, T, C));
    lnf_full = gathered.data();
  }
  // The LM head is tied to the token embedding: logits = lnf @ wte^T, vocab-parallel under tp.
  ASSIGN_OR_RETURN(h.logits, tensor({N, v_local}, Category::kActivations));
  device_.matmul_forward(h.logits.data(), lnf_full, param("wte"), nullptr, N, C, v_local);
  if (tp_.size() == 1) {
    *loss = device_.cross_entropy_forward(nullptr, h.logits.data(), batch.targets.data(), N, V);
    return Status::ok();
  }
  // Megatron's vocab-parallel cross-entropy: three all-reduces (max logit, sum of exponentials,
  // target logit) instead of gathering (N, V) logits.
  ASSIGN_OR_RETURN(h.max, tensor({N}, Category::kActivations));
  ASSIGN_OR_RETURN(h.sum_exp, tensor({N}, Category::kActivations));
  ASSIGN_OR_RETURN(Tensor target, tensor({N}, Category::kWorkspace));
  device_.vocab_parallel_local_max(h.max.data(), h.logits.data(), N, v_local);
  RETURN_IF_ERROR(tp_.all_reduce(h.max.data(), N, comm::ReduceOp::kMax));
  device_.vocab_parallel_local_sum_exp(h.sum_exp.data(), h.logits.data(), h.max.data(), N,
                                       v_local);
  RETURN_IF_ERROR(tp_.all_reduce(h.sum_exp.data(), N));
  device_.vocab_parallel_local_target_logit(target.data(), h.logits.data(), batch.targets.data(),
                                            N, v_local, tp_.rank() * v_local);
  RETURN_IF_ERROR(tp_.all_reduce(target.data(), N));
  *loss = device_.vocab_parallel_loss(nullptr, h.max.data(), h.sum_exp.data(), target.data(), N);
  return Status::ok();
}

Status GptChunk::head_backward(const MicroBatch& batch, const float* x, Head& h, float* dx) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t v_local = V / tp_.size();
  ASSIGN_OR_RETURN(Tensor dlogits, tensor({N, v_local}, Category::kWorkspace));
  if (tp_.size() == 1) {
    device_.cross_entropy_backward(dlogits.data(), h.logits.data(), batch.targets.data(), N, V,
                                   batch.dloss_scale);
  } else {
    device_.vocab_parallel_backward(dlogits.data(), h.logits.data(), batch.targets.data(),
                                    h.max.data(), h.sum_exp.data(), N, v_local,
                                    tp_.rank() * v_local, batch.dloss_scale);
  }
  Tensor gathered;
  const float* lnf_full = h.lnf.data();
  if (tp_.sequence_parallel()) {
    ASSIGN_OR_RETURN(gathered, tensor({N, C}, Category::kWorkspace));
    RETURN_IF_ERROR(tp_.enter_forward(h.lnf.data(), gathered.data(), B, T, C));
    lnf_full = gathered.data();
  }
  ASSIGN_OR_RETURN(Tensor d_lnf_full, tensor({N, C}, Category::kWorkspace));
  device_.matmul_backward(d_lnf_full.data(), grad("wte"), nullptr, dlogits.data(), lnf_full,
                          param("wte"), N, C, v_local);
  ASSIGN_OR_RETURN(Tensor d_lnf, tensor({n, C}, Category::kWorkspace));
  RETURN_IF_ERROR(tp_.enter_backward(d_lnf_full.data(), d_lnf.data(), B, T, C));
  device_.layernorm_backward(dx, grad("lnfw"), grad("lnfb"), d_lnf.data(), x, param("lnfw"),
                             h.mean.data(), h.rstd.data(), n, C);
  h = Head();
  return Status::ok();
}

Status GptChunk::forward(int micro_batch, const MicroBatch& batch, const float* input,
                         float* output, float* loss) {
  const int64_t n = tp_.local_tokens(shape_.B, shape_.T);
  InFlight& f = in_flight_[micro_batch];
  ASSIGN_OR_RETURN(f.input, tensor({n, shape_.C}, Category::kActivations));
  if (placement_.first) {
    RETURN_IF_ERROR(embed_forward(batch, f.input.data()));
  } else {
    device_.copy(f.input.data(), input, n * shape_.C);
  }
  f.blocks.resize(weights_.size());
  const float* x = f.input.data();
  for (size_t i = 0; i < weights_.size(); ++i) {
    RETURN_IF_ERROR(block_.forward(weights_[i], x, f.blocks[i]));
    x = f.blocks[i].out.data();
  }
  if (placement_.last) return head_forward(batch, x, f.head, loss);
  device_.copy(output, x, n * shape_.C);
  return Status::ok();
}

Status GptChunk::backward(int micro_batch, const MicroBatch& batch, const float* grad_output,
                          float* grad_input,
                          const std::function<void(const std::string&)>& on_unit_ready) {
  auto ready = [&](const std::string& unit) {
    if (on_unit_ready) on_unit_ready(unit);
  };
  auto found = in_flight_.find(micro_batch);
  if (found == in_flight_.end()) {
    return failed("backward of micro-batch {} on chunk {} before its forward", micro_batch,
                  placement_.chunk);
  }
  InFlight& f = found->second;
  const int64_t n = tp_.local_tokens(shape_.B, shape_.T);
  const int64_t C = shape_.C;
  ASSIGN_OR_RETURN(Tensor dx, tensor({n, C}, Category::kWorkspace));
  const auto block_input = [&](size_t i) {
    return i == 0 ? f.input.data() : f.blocks[i - 1].out.data();
  };
  const float* last_out = f.blocks.empty() ? f.input.data() : f.blocks.back().out.data();
  if (placement_.last) {
    RETURN_IF_ERROR(head_backward(batch, last_out, f.head, dx.data()));
    ready("final");
    if (!placement_.first) ready("head");
  } else {
    device_.copy(dx.data(), grad_output, n * C);
  }
  ASSIGN_OR_RETURN(Tensor dx_in, tensor({n, C}, Category::kWorkspace));
  for (size_t i = f.blocks.size(); i-- > 0;) {
    device_.fill(dx_in.data(), n * C, 0.0f);
    RETURN_IF_ERROR(block_.backward(weights_[i], block_input(i), f.blocks[i], dx.data(),
                                    dx_in.data()));
    std::swap(dx, dx_in);
    ready(fmt::format("layer{}", placement_.layers[i]));
  }
  if (placement_.first) {
    RETURN_IF_ERROR(embed_backward(batch, dx.data()));
    ready("embedding");
  } else {
    device_.copy(grad_input, dx.data(), n * C);
  }
  in_flight_.erase(found);
  return Status::ok();
}

}  // namespace partrain::runner
