#include "runner/workload/sharded_state.h"

#include <algorithm>
#include <span>

#include "core/log.h"
#include "profiler/trace_scope.h"
#include "runner/ops/bf16_round.h"
#include "runner/workload/bf16_states.h"

namespace partrain::runner {

using memory::Category;

namespace {

// The part of [begin, end) inside [lo, hi), as (begin, end); empty when begin >= end.
std::pair<int64_t, int64_t> intersect(int64_t begin, int64_t end, int64_t lo, int64_t hi) {
  return {std::max(begin, lo), std::min(end, hi)};
}

}  // namespace

StatusOr<std::unique_ptr<ShardedState>> ShardedState::create(Device& device,
                                                              const ParamLayout& layout,
                                                              int stage, comm::Comm& dp,
                                                              TensorParallel& tp, uint64_t seed,
                                                              int layers, TpShard tp_shard,
                                                              StateStorage storage,
                                                              profiler::RankTracer* tracer) {
  std::unique_ptr<ShardedState> s(
      new ShardedState(device, layout, stage, dp, tp, storage, tracer));
  const UnitShards& shards = s->shards_;
  const int64_t params = stage == 3 ? shards.shard_numel() : shards.padded_numel();
  if (s->bf16()) {
    ASSIGN_OR_RETURN(s->params_, Tensor::create(device.allocator(), {params}, Category::kParams,
                                                ElementType::kBf16));
    ASSIGN_OR_RETURN(s->master_,
                     Tensor::zeros(device, {shards.shard_numel()}, Category::kOptimizer));
  } else {
    ASSIGN_OR_RETURN(s->params_, Tensor::zeros(device, {params}, Category::kParams));
  }
  if (storage.bf16_grads) {
    ASSIGN_OR_RETURN(s->grads_, Tensor::create(device.allocator(), {shards.shard_numel()},
                                               Category::kGrads, ElementType::kBf16));
  } else {
    ASSIGN_OR_RETURN(s->grads_,
                     Tensor::zeros(device, {shards.shard_numel()}, Category::kGrads));
  }
  s->zero_grads();
  ASSIGN_OR_RETURN(s->adam_m_,
                   Tensor::zeros(device, {shards.shard_numel()}, Category::kOptimizer));
  ASSIGN_OR_RETURN(s->adam_v_,
                   Tensor::zeros(device, {shards.shard_numel()}, Category::kOptimizer));
  RETURN_IF_ERROR(s->initialise_params(seed, layers, tp_shard));
  return s;
}

Status ShardedState::initialise_params(uint64_t seed, int layers, TpShard tp_shard) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    // One unit at a time is computed on the host: FSDP never holds the whole model, ZeRO-2 the
    // whole model but never twice.
    const UnitShard& unit = shards_.unit(i);
    const std::vector<float> values = layout_.unit_initial_values(i, seed, layers, tp_shard);
    const auto owned = static_cast<size_t>(unit.owned_end - unit.owned_begin);
    const float* owned_values = values.data() + unit.owned_begin;
    if (!bf16()) {
      if (stage_ == 2) {
        device_.upload(params_.data() + unit.padded_offset, values.data(),
                       values.size() * sizeof(float));
      } else {
        device_.upload(owned_params(i), owned_values, owned * sizeof(float));
      }
      continue;
    }
    // bf16: the stored parameters are the rounded values, zero-padded to what is stored (the
    // whole padded unit for ZeRO-2, the owned shard for FSDP); the master the exact owned ones.
    const std::span<const float> stored_values =
        stage_ == 2 ? std::span<const float>(values) : std::span<const float>(owned_values, owned);
    std::vector<uint16_t> rounded(
        static_cast<size_t>(stage_ == 2 ? unit.shard * dp_.size() : unit.shard), 0);
    ops::to_bf16(rounded.data(), stored_values.data(),
                 static_cast<int64_t>(stored_values.size()));
    device_.upload(params_.bf16_data() + (stage_ == 2 ? unit.padded_offset : unit.shard_offset),
                   rounded.data(), rounded.size() * sizeof(uint16_t));
    device_.upload(owned_master(i), owned_values, owned * sizeof(float));
  }
  return Status::ok();
}

void ShardedState::zero_grads() {
  if (storage_.bf16_grads) {
    device_.zero_bf16(grads_.bf16_data(), grads_.numel());
  } else {
    device_.fill(grads_.data(), grads_.numel(), 0.0f);
  }
}

int64_t ShardedState::owned_offset(size_t unit) const {
  const UnitShard& s = shards_.unit(unit);
  if (stage_ == 3) return s.shard_offset;
  return s.padded_offset + shards_.dp_rank() * s.shard;
}

float* ShardedState::owned_master(size_t unit) {
  return bf16() ? master_.data() + shards_.unit(unit).shard_offset : owned_params(unit);
}

const uint16_t* ShardedState::full_bf16_params(size_t unit, const Held& held) {
  if (stage_ == 3 && dp_.size() > 1) return held.gathered.bf16_data();
  // ZeRO-2 stores every unit whole; FSDP over one rank owns all of it.
  return stage_ == 2 ? params_.bf16_data() + shards_.unit(unit).padded_offset
                     : owned_bf16_params(unit);
}

StatusOr<UnitView> ShardedState::acquire(size_t unit, Pass pass) {
  Held& held = held_.at(unit);
  if (held.holds++ == 0) {
    if (stage_ == 3) {
      ASSIGN_OR_RETURN(held.gathered, gather(unit, pass));
    }
    if (pass == Pass::kBackward) {
      // The reduce-scatter's send buffer: transient, so counted as comm (like a DDP bucket
      // copy), leaving the grads category at exactly the shard.
      const UnitShard& s = shards_.unit(unit);
      ASSIGN_OR_RETURN(held.staging, Tensor::create(device_.allocator(), {s.shard * dp_.size()},
                                                    Category::kComm));
      device_.fill(held.staging.data(), held.staging.numel(), 0.0f);
    }
  }
  UnitView view;
  if (bf16()) {
    view.bf16_params = full_bf16_params(unit, held);
  } else {
    view.params = stage_ == 3 ? held.gathered.data()
                              : params_.data() + shards_.unit(unit).padded_offset;
  }
  view.grads = held.staging.numel() > 0 ? held.staging.data() : nullptr;
  return view;
}

Status ShardedState::release(size_t unit, Pass pass) {
  Held& held = held_.at(unit);
  if (held.holds == 0) {
    return failed("release of parameter unit {} that is not acquired",
                  layout_.units()[unit].name);
  }
  if (--held.holds > 0) return Status::ok();
  held.gathered = Tensor();
  if (pass == Pass::kForward) return Status::ok();
  Tensor staging = std::move(held.staging);
  held.staging = Tensor();
  return launch_reduce(unit, std::move(staging));
}

StatusOr<Tensor> ShardedState::gather(size_t unit, Pass pass) {
  trace_.emplace_back(unit, pass);
  Tensor buffer;
  auto found = prefetched_.find(unit);
  if (found != prefetched_.end()) {
    if (found->second.work) RETURN_IF_ERROR(found->second.work->wait());
    buffer = std::move(found->second.buffer);
    prefetched_.erase(found);
    ++prefetch_hits_;
  } else {
    ASSIGN_OR_RETURN(buffer, gather_buffer(unit));
    comm::WorkPtr work = launch_gather(unit, buffer);
    if (work) RETURN_IF_ERROR(work->wait());
  }
  RETURN_IF_ERROR(prefetch_after(unit, pass));
  return buffer;
}

StatusOr<Tensor> ShardedState::gather_buffer(size_t unit) {
  if (bf16() && dp_.size() == 1) return Tensor();  // read straight from the rank's own
  return Tensor::create(device_.allocator(), {shards_.unit(unit).shard * dp_.size()},
                        Category::kComm, bf16() ? ElementType::kBf16 : ElementType::kF32);
}

comm::WorkPtr ShardedState::launch_gather(size_t unit, Tensor& buffer) {
  const UnitShard& s = shards_.unit(unit);
  if (dp_.size() == 1) {
    if (!bf16()) device_.copy(buffer.data(), owned_params(unit), s.shard);
    return nullptr;
  }
  // bf16: half the bytes of an fp32 gather.
  return dp_.all_gather_async(params_.at(owned_offset(unit)), buffer.at(0),
                              static_cast<size_t>(s.shard), wire_dtype(params_));
}

Status ShardedState::prefetch_after(size_t unit, Pass pass) {
  // Every dp rank runs the same schedule, so the recorded order, and any deviation from it, is
  // the same on all of them: the prefetched gathers are issued in the same order everywhere.
  const size_t at = trace_.size() - 1;
  if (!prefetch_ok_ || order_.empty()) return Status::ok();
  if (at >= order_.size() || order_[at] != Use{unit, pass}) {
    prefetch_ok_ = false;
    return Status::ok();
  }
  if (at + 1 >= order_.size()) return Status::ok();
  const size_t next = order_[at + 1].first;
  if (prefetched_.count(next) > 0) return Status::ok();
  Prefetch prefetch;
  ASSIGN_OR_RETURN(prefetch.buffer, gather_buffer(next));
  prefetch.work = launch_gather(next, prefetch.buffer);
  prefetched_.emplace(next, std::move(prefetch));
  return Status::ok();
}

Status ShardedState::launch_reduce(size_t unit, Tensor staging) {
  const UnitShard& s = shards_.unit(unit);
  PendingReduce pending;
  pending.unit = unit;
  pending.staging = std::move(staging);
  if (dp_.size() > 1) {
    // In place: this rank's block of the staging buffer receives the sum over dp.
    float* data = pending.staging.data();
    pending.work = dp_.reduce_scatter_async(data, data + shards_.dp_rank() * s.shard,
                                            static_cast<size_t>(s.shard), comm::DType::kF32,
                                            comm::ReduceOp::kSum);
  }
  reduces_.push_back(std::move(pending));
  // One reduce-scatter stays in flight behind the next unit's backward; older ones are
  // finished, so at most two staging buffers live at once.
  return drain_reduces(1);
}

Status ShardedState::finish_reduce(PendingReduce& pending) {
  if (pending.work) RETURN_IF_ERROR(pending.work->wait());
  const UnitShard& s = shards_.unit(pending.unit);
  float* reduced = pending.staging.data() + shards_.dp_rank() * s.shard;
  if (replicas_ != nullptr && replicas_->size() > 1) {
    RETURN_IF_ERROR(replicas_->all_reduce(reduced, reduced, static_cast<size_t>(s.shard),
                                          comm::DType::kF32, comm::ReduceOp::kSum));
  }
  if (storage_.bf16_grads) {
    device_.accumulate_bf16(owned_bf16_grads(pending.unit), reduced, s.shard);
  } else {
    float* shard = owned_grads(pending.unit);
    device_.residual_forward(shard, shard, reduced, s.shard);
  }
  return Status::ok();
}

Status ShardedState::drain_reduces(size_t keep) {
  while (reduces_.size() > keep) {
    Status status = finish_reduce(reduces_.front());
    reduces_.pop_front();
    RETURN_IF_ERROR(status);
  }
  return Status::ok();
}

Status ShardedState::end_step() {
  RETURN_IF_ERROR(drain_reduces(0));
  Status result;
  for (auto& [unit, prefetch] : prefetched_) {
    if (!prefetch.work) continue;
    Status status = prefetch.work->wait();
    if (result.is_ok()) result = status;
  }
  prefetched_.clear();
  if (stage_ == 3) {
    log::debug("fsdp: {} gathers this step, {} of them prefetched", trace_.size(),
               prefetch_hits_);
  }
  prefetch_hits_ = 0;
  if (order_.empty()) order_ = trace_;
  trace_.clear();
  return result;
}

Status ShardedState::reduce_gradients(comm::Comm* tied_group) {
  RETURN_IF_ERROR(end_step());
  const int64_t rank = shards_.dp_rank();
  const auto& units = layout_.units();
  if (tp_.sequence_parallel()) {
    // Under SP the layernorms saw only this rank's sequence shard: sum their grads over tp.
    // Every tp rank has the same unit sizes, so the same owned ranges.
    for (size_t i = 0; i < units.size(); ++i) {
      const UnitShard& s = shards_.unit(i);
      for (const LocalParam& param : units[i].params) {
        if (!param.spec.partial_grad_under_sp) continue;
        const int64_t local = param.offset - units[i].offset;
        auto [begin, end] = intersect(local, local + param.numel, s.owned_begin, s.owned_end);
        if (begin >= end) continue;
        RETURN_IF_ERROR(tp_.sum_gradients(grads_.at(s.shard_offset + (begin - rank * s.shard)),
                                          end - begin, wire_dtype(grads_)));
      }
    }
  }
  if (tied_group != nullptr) {
    // The tied wte is a unit of its own on both stages, so both shard it alike.
    const size_t wte = layout_.unit_of("wte");
    const UnitShard& s = shards_.unit(wte);
    const int64_t count = s.owned_end - s.owned_begin;
    if (count > 0) {
      void* grads = grads_.at(s.shard_offset);
      RETURN_IF_ERROR(tied_group->all_reduce(grads, grads, static_cast<size_t>(count),
                                             wire_dtype(grads_), comm::ReduceOp::kSum));
    }
  }
  return Status::ok();
}

StatusOr<double> ShardedState::owned_squares(int tp_rank, bool params, NormShare share) {
  const int64_t rank = shards_.dp_rank();
  const auto& units = layout_.units();
  double sum = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].name == "head") continue;  // the first stage's wte counts for both copies
    const UnitShard& s = shards_.unit(i);
    const auto [counted_begin, counted_end] = share.piece(s.owned_begin, s.owned_end);
    for (const LocalParam& param : units[i].params) {
      if (param.spec.split == TpSplit::kReplicated && tp_rank != 0) continue;
      const int64_t local = param.offset - units[i].offset;
      auto [begin, end] = intersect(local, local + param.numel, counted_begin, counted_end);
      if (begin >= end) continue;
      // Parameters: the master under bf16 (the exact values), laid out as the gradients.
      Tensor& values = params ? (bf16() ? master_ : params_) : grads_;
      const int64_t owned = params && !bf16() ? owned_offset(i) : s.shard_offset;
      sum += sum_of_squares(device_, values, owned + (begin - rank * s.shard), end - begin);
    }
  }
  return sum;
}

Status ShardedState::update(const ops::AdamWConfig& adam, int64_t step, float grad_scale) {
  ops::AdamWConfig clipped = adam;
  clipped.grad_scale = grad_scale;  // fused: no pass of its own over the gradients
  std::vector<comm::WorkPtr> gathers;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const UnitShard& s = shards_.unit(i);
    {
      profiler::TraceScope scope(tracer_, "adamw", profiler::SliceCategory::kCompute);
      adamw_update(device_, owned_master(i), grads_, s.shard_offset,
                   adam_m_.data() + s.shard_offset, adam_v_.data() + s.shard_offset, s.shard,
                   clipped, step, bf16() ? owned_bf16_params(i) : nullptr);
    }
    if (stage_ == 2 && dp_.size() > 1) {
      // ZeRO-2 keeps whole parameters: each unit is gathered (in place) once updated.
      gathers.push_back(dp_.all_gather_async(params_.at(owned_offset(i)),
                                             params_.at(s.padded_offset),
                                             static_cast<size_t>(s.shard), wire_dtype(params_)));
    }
  }
  Status result;
  for (auto& work : gathers) {
    Status status = work->wait();
    if (result.is_ok()) result = status;
  }
  return result;
}

}  // namespace partrain::runner
