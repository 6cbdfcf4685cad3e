#include "runner/workload/gpt_chunk.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/trace_scope.h"
#include "runner/workload/moe_specs.h"

namespace partrain::runner {

using memory::Category;

GptChunk::GptChunk(Device& device, TensorParallel& tp, GptShape shape, Recompute recompute,
                   const ParamLayout& layout, ParamAccess& access, ChunkPlacement placement,
                   ElementType activations, profiler::RankTracer* tracer,
                   const ExpertWiring* experts)
    : device_(device),
      tp_(tp),
      shape_(shape),
      layout_(layout),
      access_(access),
      placement_(std::move(placement)),
      store_(device, activations),
      experts_(experts),
      moe_(experts != nullptr ? std::make_unique<MoeMlp>(device, tp, *experts->ep, *experts->data,
                                                         experts->options)
                              : nullptr),
      block_(device, tp, shape, recompute, store_, moe_.get()),
      tracer_(tracer) {
  static constexpr const char* kNames[kGptBlockParams] = {
      "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
      "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
  const auto& units = layout.units();
  for (const char* name : {"wte", "wpe", "lnfw", "lnfb"}) {
    const size_t unit = layout.unit_of(name);
    if (unit == units.size()) continue;
    refs_[name] = ParamRef{unit, layout.find(name)->offset - units[unit].offset};
  }
  for (int layer : placement_.layers) {
    BlockRefs refs;
    refs.unit = layout.unit_of(fmt::format("layer{}.{}", layer, kNames[0]));
    for (int i = 0; i < kGptBlockParams; ++i) {
      const LocalParam* p = layout.find(fmt::format("layer{}.{}", layer, kNames[i]));
      if (p == nullptr) continue;  // an MoE block has no dense MLP
      refs.offsets[static_cast<size_t>(i)] = p->offset - units[refs.unit].offset;
    }
    if (experts_ != nullptr && layout.find(router_name(layer)) != nullptr) {
      const auto& units_of_experts = experts_->layout->units();
      refs.experts_unit = static_cast<size_t>(
          std::find_if(units_of_experts.begin(), units_of_experts.end(),
                       [&](const ParamUnit& u) { return u.name == experts_unit_name(layer); }) -
          units_of_experts.begin());
      refs.moe = moe_offsets(layer, refs);
    }
    blocks_.push_back(refs);
  }
}

MoeOffsets GptChunk::moe_offsets(int layer, const BlockRefs& refs) const {
  auto offset_in = [](const ParamLayout& layout, size_t unit, const std::string& name) {
    return layout.find(name)->offset - layout.units()[unit].offset;
  };
  const MoeOptions& o = experts_->options;
  MoeOffsets moe;
  moe.layer = layer;
  moe.router = offset_in(layout_, refs.unit, router_name(layer));
  for (int s = 0; s < o.shared_experts; ++s) {
    std::array<int64_t, kExpertParams>& at = moe.shared.emplace_back();
    for (int p = 0; p < kExpertParams; ++p) {
      at[static_cast<size_t>(p)] =
          offset_in(layout_, refs.unit, shared_expert_name(layer, s, ExpertParam(p)));
    }
  }
  // This rank's experts, in the order its unit holds them (global indices ascending).
  const ParamUnit& unit = experts_->layout->units()[refs.experts_unit];
  for (size_t i = 0; i < unit.params.size(); ++i) {
    if (i % kExpertParams == 0) moe.routed.emplace_back();
    moe.routed.back()[i % kExpertParams] = unit.params[i].offset - unit.offset;
  }
  return moe;
}

StatusOr<GptChunk::Bound> GptChunk::bind(const std::string& name, Pass pass) {
  const ParamRef& ref = refs_.at(name);
  ASSIGN_OR_RETURN(UnitView view, access_.acquire(ref.unit, pass));
  ASSIGN_OR_RETURN(UnitParams unit, UnitParams::bind(device_, view, layout_.units()[ref.unit]));
  return Bound{std::move(unit), ref.offset};
}

Status GptChunk::unbind(Bound& bound, const std::string& name, Pass pass) {
  bound.unit.flush();
  return access_.release(refs_.at(name).unit, pass);
}

Status GptChunk::unbind_block(BlockWeights& w, size_t i, Pass pass) {
  w.flush();
  if (blocks_[i].moe) RETURN_IF_ERROR(experts_->access->release(blocks_[i].experts_unit, pass));
  return access_.release(blocks_[i].unit, pass);
}

StatusOr<BlockWeights> GptChunk::bind_block(size_t i, Pass pass) {
  const BlockRefs& refs = blocks_[i];
  ASSIGN_OR_RETURN(UnitView view, access_.acquire(refs.unit, pass));
  ASSIGN_OR_RETURN(UnitParams unit, UnitParams::bind(device_, view, layout_.units()[refs.unit]));
  BlockWeights weights(std::move(unit), refs.offsets);
  if (refs.moe) {
    ASSIGN_OR_RETURN(UnitView experts, experts_->access->acquire(refs.experts_unit, pass));
    ASSIGN_OR_RETURN(
        UnitParams bound,
        UnitParams::bind(device_, experts, experts_->layout->units()[refs.experts_unit]));
    weights.bind_experts(std::move(bound), &*refs.moe);
  }
  return weights;
}

StatusOr<Tensor> GptChunk::tensor(std::vector<int64_t> shape, Category category) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape), category));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

Status GptChunk::embed_forward(const MicroBatch& batch, Tensor& x0) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t v_local = V / tp_.size();
  const int64_t v_start = tp_.rank() * v_local;
  ASSIGN_OR_RETURN(Tensor partial, tensor({B * T, C}, Category::kWorkspace));
  ASSIGN_OR_RETURN(Bound wte, bind("wte", Pass::kForward));
  ASSIGN_OR_RETURN(Bound wpe, bind("wpe", Pass::kForward));
  // Vocab-parallel embedding (Megatron): each rank looks up its rows of wte, the partial sums are
  // reduced; the replicated position embedding is added by one rank only.
  device_.embedding_forward_vocab_range(partial.data(), batch.token_ids(), wte.matrix(),
                                        tp_.rank() == 0 ? wpe.matrix() : nullptr, B, T, C, v_start,
                                        v_start + v_local);
  RETURN_IF_ERROR(unbind(wpe, "wpe", Pass::kForward));
  RETURN_IF_ERROR(unbind(wte, "wte", Pass::kForward));
  ASSIGN_OR_RETURN(ActivationStore::Output out, store_.output(x0));
  RETURN_IF_ERROR(tp_.exit_forward(partial.data(), out.data(), B, T, C));
  store_.keep(std::move(out), x0);  // the first block reads x0 itself
  return Status::ok();
}

Status GptChunk::embed_backward(const MicroBatch& batch, const float* dx0) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t v_local = V / tp_.size();
  const int64_t v_start = tp_.rank() * v_local;
  ASSIGN_OR_RETURN(Tensor d_full, tensor({B * T, C}, Category::kWorkspace));
  RETURN_IF_ERROR(tp_.exit_backward(dx0, d_full.data(), B, T, C));
  ASSIGN_OR_RETURN(Bound wte, bind("wte", Pass::kBackward));
  ASSIGN_OR_RETURN(Bound wpe, bind("wpe", Pass::kBackward));
  // Every rank updates its replica of wpe from the full gradient, so the replicas stay equal.
  // The rows are scattered: summed in fp32 (staged under bf16 gradients), rounded once.
  ASSIGN_OR_RETURN(float* dwte, wte.unit.fp32_grad(wte.offset));
  ASSIGN_OR_RETURN(float* dwpe, wpe.unit.fp32_grad(wpe.offset));
  device_.embedding_backward_vocab_range(dwte, dwpe, d_full.data(), batch.token_ids(), B, T, C,
                                         v_start, v_start + v_local);
  RETURN_IF_ERROR(unbind(wpe, "wpe", Pass::kBackward));
  return unbind(wte, "wte", Pass::kBackward);
}

Status GptChunk::head_forward(const MicroBatch& batch, const Tensor& x, Head& h, float* loss) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t v_local = V / tp_.size();
  ASSIGN_OR_RETURN(h.lnf, store_.create({n, C}));
  ASSIGN_OR_RETURN(h.mean, tensor({n}, Category::kActivations));
  ASSIGN_OR_RETURN(h.rstd, tensor({n}, Category::kActivations));
  ASSIGN_OR_RETURN(ActivationStore::Output lnf, store_.output(h.lnf));
  {
    ASSIGN_OR_RETURN(ActivationStore::Input x_in, store_.input(x));
    ASSIGN_OR_RETURN(Bound w, bind("lnfw", Pass::kForward));
    ASSIGN_OR_RETURN(Bound b, bind("lnfb", Pass::kForward));
    device_.layernorm_forward(lnf.data(), h.mean.data(), h.rstd.data(), x_in.data(),
                              w.vector(), b.vector(), n, C);
    store_.store(lnf, h.lnf);
    RETURN_IF_ERROR(unbind(b, "lnfb", Pass::kForward));
    RETURN_IF_ERROR(unbind(w, "lnfw", Pass::kForward));
  }
  // Under SP the gathered input is not kept: backward gathers it again.
  Tensor gathered;
  ASSIGN_OR_RETURN(const float* lnf_full,
                   tp_.region_input(h.lnf, gathered, B, T, C, lnf.data()));
  // The LM head is tied to the token embedding: logits = lnf @ wte^T, vocab-parallel under tp.
  ASSIGN_OR_RETURN(h.logits, tensor({N, v_local}, Category::kActivations));
  {
    // The tied wte is acquired for each of its uses (embedding, head), as FSDP gathers it.
    ASSIGN_OR_RETURN(Bound wte, bind("wte", Pass::kForward));
    device_.matmul_forward(h.logits.data(), lnf_full, wte.matrix(), nullptr, N, C, v_local);
    RETURN_IF_ERROR(unbind(wte, "wte", Pass::kForward));
  }
  if (tp_.size() == 1) {
    *loss = device_.cross_entropy_forward(nullptr, h.logits.data(), batch.target_ids(), N, V);
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
  device_.vocab_parallel_local_target_logit(target.data(), h.logits.data(), batch.target_ids(),
                                            N, v_local, tp_.rank() * v_local);
  RETURN_IF_ERROR(tp_.all_reduce(target.data(), N));
  *loss = device_.vocab_parallel_loss(nullptr, h.max.data(), h.sum_exp.data(), target.data(), N);
  return Status::ok();
}

Status GptChunk::head_backward(const MicroBatch& batch, const Tensor& x, Head& h, float* dx) {
  const auto& [B, T, C, NH, F, V] = shape_;
  const int64_t N = B * T;
  const int64_t n = tp_.local_tokens(B, T);
  const int64_t v_local = V / tp_.size();
  ASSIGN_OR_RETURN(Tensor dlogits, tensor({N, v_local}, Category::kWorkspace));
  if (tp_.size() == 1) {
    device_.cross_entropy_backward(dlogits.data(), h.logits.data(), batch.target_ids(), N, V,
                                   batch.dloss_scale);
  } else {
    device_.vocab_parallel_backward(dlogits.data(), h.logits.data(), batch.target_ids(),
                                    h.max.data(), h.sum_exp.data(), N, v_local,
                                    tp_.rank() * v_local, batch.dloss_scale);
  }
  Tensor gathered;
  ASSIGN_OR_RETURN(const float* lnf_full, tp_.region_input(h.lnf, gathered, B, T, C));
  ASSIGN_OR_RETURN(Tensor d_lnf_full, tensor({N, C}, Category::kWorkspace));
  {
    ASSIGN_OR_RETURN(Bound wte, bind("wte", Pass::kBackward));
    device_.matmul_backward(d_lnf_full.data(), wte.matrix_grad(), nullptr, dlogits.data(), lnf_full,
                            wte.matrix(), N, C, v_local);
    RETURN_IF_ERROR(unbind(wte, "wte", Pass::kBackward));
  }
  ASSIGN_OR_RETURN(Tensor d_lnf, tensor({n, C}, Category::kWorkspace));
  RETURN_IF_ERROR(tp_.enter_backward(d_lnf_full.data(), d_lnf.data(), B, T, C));
  gathered = Tensor();
  ASSIGN_OR_RETURN(ActivationStore::Input x_in, store_.input(x));
  ASSIGN_OR_RETURN(Bound w, bind("lnfw", Pass::kBackward));
  ASSIGN_OR_RETURN(Bound b, bind("lnfb", Pass::kBackward));
  device_.layernorm_backward(dx, w.grad(), b.grad(), d_lnf.data(), x_in.data(), w.vector(),
                             h.mean.data(), h.rstd.data(), n, C);
  RETURN_IF_ERROR(unbind(b, "lnfb", Pass::kBackward));
  RETURN_IF_ERROR(unbind(w, "lnfw", Pass::kBackward));
  h = Head();
  return Status::ok();
}

Status GptChunk::forward(int micro_batch, const MicroBatch& batch, const Tensor* input,
                         Tensor* output, float* loss) {
  const int64_t n = tp_.local_tokens(shape_.B, shape_.T);
  InFlight& f = in_flight_[micro_batch];
  ASSIGN_OR_RETURN(f.input, store_.create({n, shape_.C}));
  if (placement_.first) {
    profiler::TraceScope scope(tracer_, "embedding.forward", profiler::SliceCategory::kCompute,
                               -1, micro_batch);
    RETURN_IF_ERROR(embed_forward(batch, f.input));
  } else {
    RETURN_IF_ERROR(store_.copy(f.input, *input));
  }
  f.blocks.resize(blocks_.size());
  const Tensor* x = &f.input;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    profiler::TraceScope scope(tracer_, "block.forward", profiler::SliceCategory::kCompute,
                               placement_.layers[i], micro_batch);
    ASSIGN_OR_RETURN(BlockWeights w, bind_block(i, Pass::kForward));
    RETURN_IF_ERROR(block_.forward(w, *x, f.blocks[i]));
    RETURN_IF_ERROR(unbind_block(w, i, Pass::kForward));
    x = &f.blocks[i].out;
  }
  if (placement_.last) {
    profiler::TraceScope scope(tracer_, "head.forward", profiler::SliceCategory::kCompute, -1,
                               micro_batch);
    return head_forward(batch, *x, f.head, loss);
  }
  return store_.copy(*output, *x);
}

void GptChunk::report_units(const std::function<void(const std::string&)>& on_unit_ready) const {
  if (!on_unit_ready) return;
  if (placement_.last) {
    on_unit_ready("final");
    if (!placement_.first) on_unit_ready("head");
  }
  for (size_t i = blocks_.size(); i-- > 0;) {
    on_unit_ready(fmt::format("layer{}", placement_.layers[i]));
  }
  if (placement_.first) on_unit_ready("embedding");
}

Status GptChunk::backward(int micro_batch, const MicroBatch& batch, const Tensor* grad_output,
                          Tensor* grad_input,
                          const std::function<void(const std::string&)>& on_unit_ready) {
  auto found = in_flight_.find(micro_batch);
  if (found == in_flight_.end()) {
    return failed("backward of micro-batch {} on chunk {} before its forward", micro_batch,
                  placement_.chunk);
  }
  InFlight& f = found->second;
  // Split, the units are finished by weight_backward, which reports them.
  auto ready = [&](const std::string& unit) {
    if (on_unit_ready && !split_) on_unit_ready(unit);
  };
  WeightGradients& weight_grads = deferred_.try_emplace(micro_batch, device_, split_).first->second;
  const int64_t n = tp_.local_tokens(shape_.B, shape_.T);
  const int64_t C = shape_.C;
  ASSIGN_OR_RETURN(Tensor dx, tensor({n, C}, Category::kWorkspace));
  const auto block_input = [&](size_t i) -> const Tensor& {
    return i == 0 ? f.input : f.blocks[i - 1].out;
  };
  const Tensor& last_out = f.blocks.empty() ? f.input : f.blocks.back().out;
  if (placement_.last) {
    profiler::TraceScope scope(tracer_, "head.backward", profiler::SliceCategory::kCompute, -1,
                               micro_batch);
    RETURN_IF_ERROR(head_backward(batch, last_out, f.head, dx.data()));
    ready("final");
    if (!placement_.first) ready("head");
  } else {
    store_.copy_out(dx.data(), *grad_output);
  }
  ASSIGN_OR_RETURN(Tensor dx_in, tensor({n, C}, Category::kWorkspace));
  for (size_t i = f.blocks.size(); i-- > 0;) {
    profiler::TraceScope scope(tracer_, "block.backward", profiler::SliceCategory::kCompute,
                               placement_.layers[i], micro_batch);
    device_.fill(dx_in.data(), n * C, 0.0f);
    ASSIGN_OR_RETURN(BlockWeights w, bind_block(i, Pass::kBackward));
    RETURN_IF_ERROR(
        block_.backward(w, block_input(i), f.blocks[i], dx.data(), dx_in.data(), weight_grads));
    RETURN_IF_ERROR(unbind_block(w, i, Pass::kBackward));
    std::swap(dx, dx_in);
    ready(fmt::format("layer{}", placement_.layers[i]));
  }
  if (placement_.first) {
    profiler::TraceScope scope(tracer_, "embedding.backward", profiler::SliceCategory::kCompute,
                               -1, micro_batch);
    RETURN_IF_ERROR(embed_backward(batch, dx.data()));
    ready("embedding");
  } else {
    store_.assign(*grad_input, dx.data());
  }
  in_flight_.erase(found);
  if (!split_) deferred_.erase(micro_batch);
  return Status::ok();
}

Status GptChunk::weight_backward(int micro_batch,
                                 const std::function<void(const std::string&)>& on_unit_ready) {
  auto found = deferred_.find(micro_batch);
  if (found == deferred_.end()) {
    return failed("weight gradients of micro-batch {} on chunk {} before its backward", micro_batch,
                  placement_.chunk);
  }
  {
    profiler::TraceScope scope(tracer_, "weight.backward", profiler::SliceCategory::kCompute, -1,
                               micro_batch);
    found->second.run();
  }
  deferred_.erase(found);
  if (split_) report_units(on_unit_ready);
  return Status::ok();
}

}  // namespace partrain::runner
