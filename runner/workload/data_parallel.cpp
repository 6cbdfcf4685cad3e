#include "runner/workload/data_parallel.h"

#include <algorithm>

#include "profiler/trace_scope.h"
#include "runner/ops/bf16_round.h"
#include "runner/workload/bf16_states.h"

namespace partrain::runner {

using memory::Category;

StatusOr<std::unique_ptr<DataParallel>> DataParallel::create(
    Device& device, const ParamLayout& layout, const ResolvedLayout& resolved, int64_t bucket_bytes,
    Mesh& mesh, TensorParallel& tp, uint64_t seed, int layers, StateStorage storage,
    profiler::RankTracer* tracer, comm::Comm* group) {
  comm::Comm& data = group != nullptr ? *group : mesh.zero_shard();
  std::unique_ptr<DataParallel> dp(
      new DataParallel(device, layout, resolved, mesh, data, tp, storage, tracer));
  if (group == nullptr) dp->replicas_ = mesh.zero_replicas();
  const int zero = resolved.layout.zero;
  if (zero >= 2) {
    ASSIGN_OR_RETURN(dp->sharded_,
                     ShardedState::create(device, layout, zero, data, tp, seed, layers,
                                          TpShard{mesh.coords().tp, tp.size()}, storage, tracer));
    dp->sharded_->set_replicas(dp->replicas_);
    return dp;
  }
  const int64_t dp_size = data.size();
  const int64_t dp_rank = data.rank();
  int64_t numel = layout.numel();
  int64_t shard = numel;
  if (zero >= 1) {
    // Equal shards need a length divisible by dp: pad the flat buffers, as PyTorch FSDP pads its
    // FlatParameter. The padding is zero and never trained.
    shard = (numel + dp_size - 1) / dp_size;
    numel = shard * dp_size;
    dp->shard_begin_ = dp_rank * shard;
    dp->shard_end_ = dp->shard_begin_ + shard;
  } else {
    dp->shard_end_ = numel;
  }
  if (storage.bf16_params) {
    ASSIGN_OR_RETURN(dp->params_, Tensor::create(device.allocator(), {numel}, Category::kParams,
                                                 ElementType::kBf16));
    ASSIGN_OR_RETURN(dp->master_, Tensor::zeros(device, {shard}, Category::kOptimizer));
  } else {
    ASSIGN_OR_RETURN(dp->params_, Tensor::zeros(device, {numel}, Category::kParams));
  }
  if (storage.bf16_grads) {
    ASSIGN_OR_RETURN(dp->grads_, Tensor::create(device.allocator(), {numel}, Category::kGrads,
                                                ElementType::kBf16));
    device.zero_bf16(dp->grads_.bf16_data(), numel);
  } else {
    ASSIGN_OR_RETURN(dp->grads_, Tensor::zeros(device, {numel}, Category::kGrads));
  }
  ASSIGN_OR_RETURN(dp->adam_m_, Tensor::zeros(device, {shard}, Category::kOptimizer));
  ASSIGN_OR_RETURN(dp->adam_v_, Tensor::zeros(device, {shard}, Category::kOptimizer));
  RETURN_IF_ERROR(dp->initialise_params(seed, layers));
  if (zero == 0) {
    dp->ddp_ = std::make_unique<DdpBuckets>(layout, dp->grads_.at(0), wire_dtype(dp->grads_),
                                            bucket_bytes, data);
  }
  return dp;
}

Status DataParallel::initialise_params(uint64_t seed, int layers) {
  // One unit at a time is computed on the host. bf16: the parameters are the rounded values,
  // the master the exact ones, for this rank's shard; padding stays zero in both.
  const TpShard tp_shard{mesh_.coords().tp, tp_.size()};
  if (storage_.bf16_params) {
    const std::vector<uint16_t> padding(static_cast<size_t>(params_.numel() - layout_.numel()), 0);
    device_.upload(params_.bf16_data() + layout_.numel(), padding.data(), padding.size() * 2);
  }
  for (size_t i = 0; i < layout_.units().size(); ++i) {
    const std::vector<float> values = layout_.unit_initial_values(i, seed, layers, tp_shard);
    const int64_t offset = layout_.units()[i].offset;
    if (!storage_.bf16_params) {
      device_.upload(params_.data() + offset, values.data(), values.size() * sizeof(float));
      continue;
    }
    std::vector<uint16_t> rounded(values.size());
    ops::to_bf16(rounded.data(), values.data(), static_cast<int64_t>(values.size()));
    device_.upload(params_.bf16_data() + offset, rounded.data(), rounded.size() * 2);
    const int64_t end = offset + static_cast<int64_t>(values.size());
    const int64_t begin = std::max(offset, shard_begin_);
    if (begin < std::min(end, shard_end_)) {
      device_.upload(master_.data() + (begin - shard_begin_), values.data() + (begin - offset),
                     static_cast<size_t>(std::min(end, shard_end_) - begin) * sizeof(float));
    }
  }
  return Status::ok();
}

StatusOr<UnitView> DataParallel::acquire(size_t unit, Pass pass) {
  if (sharded_) return sharded_->acquire(unit, pass);
  const ParamUnit& u = layout_.units().at(unit);
  if (!storage_.bf16_params) {
    return UnitView{params_.data() + u.offset, nullptr, grads_.data() + u.offset};
  }
  // bf16: the parameters as stored (the ops read matrices in bf16, UnitParams widens vectors),
  // and the gradients as stored: fp32, or bf16 that a backward use adds into (UnitParams).
  ++holds_[unit];
  UnitView view{nullptr, params_.bf16_data() + u.offset, nullptr, nullptr};
  if (!storage_.bf16_grads) {
    view.grads = grads_.data() + u.offset;
  } else if (pass == Pass::kBackward) {
    view.bf16_grads = grads_.bf16_data() + u.offset;
  }
  return view;
}

Status DataParallel::release(size_t unit, Pass pass) {
  if (sharded_) return sharded_->release(unit, pass);
  if (!storage_.bf16_params) return Status::ok();
  int& holds = holds_.at(unit);
  if (holds == 0) {
    return failed("release of parameter unit {} that is not acquired",
                  layout_.units()[unit].name);
  }
  --holds;
  return Status::ok();
}

void DataParallel::zero_grads() {
  if (experts_ != nullptr) experts_->zero_grads();
  if (sharded_) {
    sharded_->zero_grads();
  } else if (storage_.bf16_grads) {
    device_.zero_bf16(grads_.bf16_data(), grads_.numel());
  } else {
    device_.fill(grads_.data(), grads_.numel(), 0.0f);
  }
}

void DataParallel::unit_ready(const std::string& unit) {
  if (ddp_) ddp_->unit_ready(unit);
}

Status DataParallel::reduce_gradients() {
  if (experts_ != nullptr) RETURN_IF_ERROR(experts_->reduce_gradients());
  if (sharded_) return sharded_->reduce_gradients(tied_group_);
  if (ddp_) RETURN_IF_ERROR(ddp_->finish());
  if (tp_.sequence_parallel()) {
    // Under SP the layernorms saw only this rank's sequence shard: sum their grads over tp.
    for (const ParamUnit& unit : layout_.units()) {
      for (const LocalParam& param : unit.params) {
        if (param.spec.partial_grad_under_sp) {
          RETURN_IF_ERROR(
              tp_.sum_gradients(grads_.at(param.offset), param.numel, wire_dtype(grads_)));
        }
      }
    }
  }
  if (tied_group_ != nullptr) {
    const LocalParam* wte = layout_.find("wte");
    RETURN_IF_ERROR(tied_group_->all_reduce(grads_.at(wte->offset), grads_.at(wte->offset),
                                            static_cast<size_t>(wte->numel), wire_dtype(grads_),
                                            comm::ReduceOp::kSum));
  }
  if (resolved_.layout.zero >= 1 && data_.size() > 1) {
    // ZeRO: each rank keeps the sum of its shard only (in place, NCCL-style).
    const int64_t shard = shard_end_ - shard_begin_;
    RETURN_IF_ERROR(data_.reduce_scatter(grads_.at(0), grads_.at(shard_begin_),
                                         static_cast<size_t>(shard), wire_dtype(grads_),
                                         comm::ReduceOp::kSum));
  }
  if (resolved_.layout.zero >= 1 && replicas_ != nullptr && replicas_->size() > 1) {
    // A hybrid: the shard's replicas add their sums (PyTorch HSDP's all-reduce).
    const int64_t shard = shard_end_ - shard_begin_;
    RETURN_IF_ERROR(replicas_->all_reduce(grads_.at(shard_begin_), grads_.at(shard_begin_),
                                          static_cast<size_t>(shard), wire_dtype(grads_),
                                          comm::ReduceOp::kSum));
  }
  return Status::ok();
}

StatusOr<double> DataParallel::owned_sum_of_squares(bool params) {
  ASSIGN_OR_RETURN(double local, local_sum_of_squares(params));
  if (experts_ != nullptr) {
    ASSIGN_OR_RETURN(double experts, experts_->local_sum_of_squares(params));
    local += experts;
  }
  // fp32 on the wire (the communicators carry no fp64): ~1e-7 relative, far inside what the
  // norm is used for (clipping, the equivalence checks' 1e-4).
  auto sum = static_cast<float>(local);
  RETURN_IF_ERROR(world_values_.all_reduce(&sum, 1, comm::DType::kF32, comm::ReduceOp::kSum));
  return static_cast<double>(sum);
}

StatusOr<double> DataParallel::local_sum_of_squares(bool params) {
  double local = 0;
  if (sharded_) {
    const int tp_rank = mesh_.coords().tp;
    ASSIGN_OR_RETURN(local, params ? sharded_->owned_param_squares(tp_rank, norm_share())
                                   : sharded_->owned_grad_squares(tp_rank, norm_share()));
  } else if (params && storage_.bf16_params) {
    // The exact parameters: the master, which holds [shard_begin_, shard_end_).
    ASSIGN_OR_RETURN(local, flat_owned_squares(master_, shard_begin_));
  } else {
    ASSIGN_OR_RETURN(local, flat_owned_squares(params ? params_ : grads_, 0));
  }
  return local;
}

NormShare DataParallel::norm_share() const {
  // Without ZeRO every dp rank holds every element; with it a hybrid's replicas hold the same
  // shard. (Megatron-LM's DDP ranks each sum all of them; an equal piece each, then the sum, is
  // the same norm without the redundant work.)
  if (resolved_.layout.zero == 0) return {data_.size(), data_.rank()};
  if (replicas_ != nullptr) return {replicas_->size(), replicas_->rank()};
  return {};
}

StatusOr<double> DataParallel::flat_owned_squares(Tensor& values, int64_t first) {
  // An element counts on one rank only: replicated tensors on tp rank 0; of the elements this
  // rank updates (its shard, or all of them without ZeRO), its norm share's piece.
  const MeshCoords& coords = mesh_.coords();
  const auto [counted_begin, counted_end] = norm_share().piece(shard_begin_, shard_end_);
  double local = 0;
  for (const ParamUnit& unit : layout_.units()) {
    if (unit.name == "head") continue;  // the first stage's wte counts for both copies
    for (const LocalParam& param : unit.params) {
      if (param.spec.split == TpSplit::kReplicated && coords.tp != 0) continue;
      const int64_t begin = std::max(param.offset, counted_begin);
      const int64_t end = std::min(param.offset + param.numel, counted_end);
      if (begin >= end) continue;
      local += sum_of_squares(device_, values, begin - first, end - begin);
    }
  }
  return local;
}

Status DataParallel::update(const ops::AdamWConfig& adam, int64_t step, float grad_scale) {
  if (experts_ != nullptr) RETURN_IF_ERROR(experts_->update(adam, step, grad_scale));
  if (sharded_) return sharded_->update(adam, step, grad_scale);
  const int64_t shard = shard_end_ - shard_begin_;
  const bool bf16 = storage_.bf16_params;
  float* p = bf16 ? master_.data() : params_.data() + shard_begin_;
  {
    profiler::TraceScope scope(tracer_, "adamw", profiler::SliceCategory::kCompute);
    ops::AdamWConfig clipped = adam;
    clipped.grad_scale = grad_scale;  // fused: no pass of its own over the gradients
    adamw_update(device_, p, grads_, shard_begin_, adam_m_.data(), adam_v_.data(), shard, clipped,
                 step, bf16 ? params_.bf16_data() + shard_begin_ : nullptr);
  }
  if (resolved_.layout.zero >= 1 && data_.size() > 1) {  // bf16: half the bytes of fp32
    RETURN_IF_ERROR(data_.all_gather(params_.at(shard_begin_), params_.at(0),
                                     static_cast<size_t>(shard), wire_dtype(params_)));
  }
  return Status::ok();
}

}  // namespace partrain::runner
