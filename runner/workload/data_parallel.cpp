#include "runner/workload/data_parallel.h"

#include <algorithm>

#include "profiler/trace_scope.h"

namespace partrain::runner {

using memory::Category;

StatusOr<std::unique_ptr<DataParallel>> DataParallel::create(Device& device,
                                                              const ParamLayout& layout,
                                                              const ResolvedLayout& resolved,
                                                              Mesh& mesh, TensorParallel& tp,
                                                              uint64_t seed, int layers) {
  std::unique_ptr<DataParallel> dp(new DataParallel(device, layout, resolved, mesh, tp));
  if (resolved.zero >= 2) {
    ASSIGN_OR_RETURN(dp->sharded_,
                     ShardedState::create(device, layout, resolved.zero, mesh.dp(), tp, seed,
                                          layers, TpShard{mesh.coords().tp, tp.size()}));
    return dp;
  }
  const int64_t dp_size = mesh.dp().size();
  const int64_t dp_rank = mesh.coords().dp;
  int64_t numel = layout.numel();
  int64_t shard = numel;
  if (resolved.zero >= 1) {
    // Equal shards need a length divisible by dp: pad the flat buffers, as PyTorch FSDP pads its
    // FlatParameter. The padding is zero and never trained.
    shard = (numel + dp_size - 1) / dp_size;
    numel = shard * dp_size;
    dp->shard_begin_ = dp_rank * shard;
    dp->shard_end_ = dp->shard_begin_ + shard;
  } else {
    dp->shard_end_ = numel;
  }
  ASSIGN_OR_RETURN(dp->params_, Tensor::zeros(device, {numel}, Category::kParams));
  ASSIGN_OR_RETURN(dp->grads_, Tensor::zeros(device, {numel}, Category::kGrads));
  ASSIGN_OR_RETURN(dp->adam_m_, Tensor::zeros(device, {shard}, Category::kOptimizer));
  ASSIGN_OR_RETURN(dp->adam_v_, Tensor::zeros(device, {shard}, Category::kOptimizer));
  const TpShard tp_shard{mesh.coords().tp, tp.size()};
  for (size_t i = 0; i < layout.units().size(); ++i) {
    const std::vector<float> values = layout.unit_initial_values(i, seed, layers, tp_shard);
    device.upload(dp->params_.data() + layout.units()[i].offset, values.data(),
                  values.size() * sizeof(float));
  }
  if (resolved.zero == 0) {
    dp->ddp_ = std::make_unique<DdpBuckets>(layout, dp->grads_.data(), resolved.bucket_bytes,
                                            mesh.dp());
  }
  return dp;
}

StatusOr<UnitView> DataParallel::acquire(size_t unit, Pass pass) {
  if (sharded_) return sharded_->acquire(unit, pass);
  const int64_t offset = layout_.units().at(unit).offset;
  return UnitView{params_.data() + offset, grads_.data() + offset};
}

Status DataParallel::release(size_t unit, Pass pass) {
  if (sharded_) return sharded_->release(unit, pass);
  return Status::ok();
}

void DataParallel::zero_grads() {
  if (sharded_) {
    sharded_->zero_grads();
  } else {
    device_.fill(grads_.data(), grads_.numel(), 0.0f);
  }
}

void DataParallel::unit_ready(const std::string& unit) {
  if (ddp_) ddp_->unit_ready(unit);
}

Status DataParallel::reduce_gradients() {
  if (sharded_) return sharded_->reduce_gradients(tied_group_);
  if (ddp_) RETURN_IF_ERROR(ddp_->finish());
  if (tp_.sequence_parallel()) {
    // Under SP the layernorms saw only this rank's sequence shard: sum their grads over tp.
    for (const ParamUnit& unit : layout_.units()) {
      for (const LocalParam& param : unit.params) {
        if (param.spec.partial_grad_under_sp) {
          RETURN_IF_ERROR(tp_.all_reduce(grads_.data() + param.offset, param.numel));
        }
      }
    }
  }
  if (tied_group_ != nullptr) {
    const LocalParam* wte = layout_.find("wte");
    RETURN_IF_ERROR(tied_group_->all_reduce(grads_.data() + wte->offset,
                                            grads_.data() + wte->offset,
                                            static_cast<size_t>(wte->numel), comm::DType::kF32,
                                            comm::ReduceOp::kSum));
  }
  if (resolved_.zero >= 1 && mesh_.dp().size() > 1) {
    // ZeRO: each rank keeps the sum of its shard only (in place, NCCL-style).
    const int64_t shard = shard_end_ - shard_begin_;
    RETURN_IF_ERROR(mesh_.dp().reduce_scatter(grads_.data(), grads_.data() + shard_begin_,
                                              static_cast<size_t>(shard), comm::DType::kF32,
                                              comm::ReduceOp::kSum));
  }
  return Status::ok();
}

StatusOr<double> DataParallel::owned_sum_of_squares(bool params) {
  double local = 0;
  if (sharded_) {
    local = params ? sharded_->owned_param_squares(mesh_.coords().tp)
                   : sharded_->owned_grad_squares(mesh_.coords().tp);
  } else {
    local = flat_owned_squares(params ? params_.data() : grads_.data());
  }
  // fp32 on the wire (the communicators carry no fp64): ~1e-7 relative, far inside what the
  // norm is used for (clipping, the equivalence checks' 1e-4).
  auto sum = static_cast<float>(local);
  RETURN_IF_ERROR(world_values_.all_reduce(&sum, 1, comm::DType::kF32, comm::ReduceOp::kSum));
  return static_cast<double>(sum);
}

double DataParallel::flat_owned_squares(const float* values) {
  // An element counts on one rank only: replicated tensors on tp rank 0; without ZeRO on dp rank
  // 0 (every dp rank holds the same), with ZeRO on the dp rank whose shard holds it.
  const MeshCoords& coords = mesh_.coords();
  double local = 0;
  if (resolved_.zero >= 1 || coords.dp == 0) {
    for (const ParamUnit& unit : layout_.units()) {
      if (unit.name == "head") continue;  // the first stage's wte counts for both copies
      for (const LocalParam& param : unit.params) {
        if (param.spec.split == TpSplit::kReplicated && coords.tp != 0) continue;
        const int64_t begin = std::max(param.offset, shard_begin_);
        const int64_t end = std::min(param.offset + param.numel, shard_end_);
        if (begin < end) local += device_.sum_of_squares(values + begin, end - begin);
      }
    }
  }
  return local;
}

Status DataParallel::update(const ops::AdamWConfig& adam, int64_t step, float grad_scale) {
  if (sharded_) return sharded_->update(adam, step, grad_scale);
  const int64_t shard = shard_end_ - shard_begin_;
  float* p = params_.data() + shard_begin_;
  float* g = grads_.data() + shard_begin_;
  {
    profiler::TraceScope scope("adamw", profiler::SliceCategory::kCompute);
    ops::AdamWConfig clipped = adam;
    clipped.grad_scale = grad_scale;  // fused: no pass of its own over the gradients
    device_.adamw_update(p, g, adam_m_.data(), adam_v_.data(), shard, clipped, step);
  }
  if (resolved_.zero >= 1 && mesh_.dp().size() > 1) {
    RETURN_IF_ERROR(mesh_.dp().all_gather(p, params_.data(), static_cast<size_t>(shard),
                                          comm::DType::kF32));
  }
  return Status::ok();
}

}  // namespace partrain::runner
