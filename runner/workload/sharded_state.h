// ZeRO-2 and FSDP (ZeRO-3; Rajbhandari et al. 2020, PyTorch FSDP): the rank keeps only its dp
// shard of every unit's gradients and AdamW states (and, under FSDP, parameters). Each backward
// use of a unit accumulates into a full-size staging buffer that is reduce-scattered into the
// gradient shard as soon as the use ends, for every micro-batch; FSDP all-gathers a unit's
// parameters before each use, frees them after, and prefetches the next unit's gather. With bf16
// parameter storage the gathers move bf16 (half the bytes), the fp32 master is sharded with the
// AdamW moments, and the ops read a unit's bf16 parameters as gathered (UnitParams).
// With bf16 gradients the owned gradient shard is bf16: each reduce-scatter (fp32, from the fp32
// staging) is added into it rounded.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/ops/adamw.h"
#include "runner/workload/bf16_states.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/unit_shards.h"

namespace partrain::runner {

class ShardedState final : public ParamAccess {
 public:
  // stage 2 (ZeRO-2: parameters whole, padded per unit) or 3 (FSDP: parameters sharded).
  // `tracer` (null: not traced) records the optimizer's steps.
  static StatusOr<std::unique_ptr<ShardedState>> create(Device& device, const ParamLayout& layout,
                                                        int stage, comm::Comm& dp,
                                                        TensorParallel& tp, uint64_t seed,
                                                        int layers, TpShard tp_shard,
                                                        StateStorage storage = {},
                                                        profiler::RankTracer* tracer = nullptr);

  // A hybrid (HSDP): `dp` is the shard group and `replicas` the ranks holding the same shard;
  // each reduce-scatter's result is all-reduced over them before it is added to the shard.
  void set_replicas(comm::Comm* replicas) { replicas_ = replicas; }

  StatusOr<UnitView> acquire(size_t unit, Pass pass) override;
  Status release(size_t unit, Pass pass) override;

  void zero_grads();
  // After the step's backward: waits for the reduce-scatters still in flight; sums the SP
  // layernorm grads over tp and the tied embedding's over `tied_group` (may be null).
  Status reduce_gradients(comm::Comm* tied_group);
  // Sum over this rank's owned elements of squared grads / params, replicated tensors counted
  // on tp rank 0 only and the last stage's tied copy ("head") not at all; of each unit's owned
  // elements, `share`'s piece (a hybrid's replicas own the same).
  StatusOr<double> owned_grad_squares(int tp_rank, NormShare share) {
    return owned_squares(tp_rank, false, share);
  }
  StatusOr<double> owned_param_squares(int tp_rank, NormShare share) {
    return owned_squares(tp_rank, true, share);
  }
  // AdamW on the shard; ZeRO-2 then all-gathers every unit's parameters.
  Status update(const ops::AdamWConfig& adam, int64_t step, float grad_scale);

 private:
  struct Held {
    int holds = 0;
    // FSDP: the unit's full parameters while in use (comm), fp32 or bf16 as stored (none under
    // bf16 at dp 1: the rank's own are the whole unit).
    Tensor gathered;
    Tensor staging;   // backward: the unit's full gradients while produced (comm)
  };
  struct Prefetch {
    comm::WorkPtr work;
    Tensor buffer;
  };
  struct PendingReduce {
    size_t unit = 0;
    comm::WorkPtr work;
    Tensor staging;
  };
  using Use = std::pair<size_t, Pass>;

  ShardedState(Device& device, const ParamLayout& layout, int stage, comm::Comm& dp,
               TensorParallel& tp, StateStorage storage, profiler::RankTracer* tracer)
      : device_(device),
        layout_(layout),
        stage_(stage),
        storage_(storage),
        dp_(dp),
        tp_(tp),
        shards_(layout, dp.size(), dp.rank()),
        held_(layout.units().size()),
        tracer_(tracer) {}

  // The unit's owned slice of the parameters (its first `shard` elements are this rank's), as
  // stored (fp32 or bf16), and where it starts in params_ (elements).
  float* owned_params(size_t unit) { return params_.data() + owned_offset(unit); }
  uint16_t* owned_bf16_params(size_t unit) { return params_.bf16_data() + owned_offset(unit); }
  int64_t owned_offset(size_t unit) const;
  // The fp32 values AdamW updates for the unit's owned slice: the parameters, or their master.
  float* owned_master(size_t unit);
  bool bf16() const { return storage_.bf16_params; }
  Status initialise_params(uint64_t seed, int layers, TpShard tp_shard);
  // bf16: the unit's full parameters while `held`: gathered (FSDP over dp > 1) or as stored.
  const uint16_t* full_bf16_params(size_t unit, const Held& held);
  float* owned_grads(size_t unit) { return grads_.data() + shards_.unit(unit).shard_offset; }
  uint16_t* owned_bf16_grads(size_t unit) {
    return grads_.bf16_data() + shards_.unit(unit).shard_offset;
  }
  StatusOr<Tensor> gather(size_t unit, Pass pass);
  // What a gather of `unit` lands in: fp32 or bf16 (comm); empty for bf16 at dp 1, which reads
  // the rank's own shard.
  StatusOr<Tensor> gather_buffer(size_t unit);
  comm::WorkPtr launch_gather(size_t unit, Tensor& buffer);
  Status prefetch_after(size_t unit, Pass pass);
  Status launch_reduce(size_t unit, Tensor staging);
  Status finish_reduce(PendingReduce& pending);
  Status drain_reduces(size_t keep);
  Status end_step();
  StatusOr<double> owned_squares(int tp_rank, bool params, NormShare share);

  Device& device_;
  const ParamLayout& layout_;
  int stage_;
  StateStorage storage_;
  comm::Comm& dp_;
  comm::Comm* replicas_ = nullptr;
  TensorParallel& tp_;
  UnitShards shards_;
  Tensor params_, grads_, adam_m_, adam_v_;
  Tensor master_;  // bf16 storage: the fp32 master of the owned shards (optimizer category)
  std::vector<Held> held_;
  std::deque<PendingReduce> reduces_;
  // FSDP prefetch, as PyTorch FSDP does: the first step records the order of gathers; later
  // steps, on each gather, start the one that followed it. A deviation turns prefetch off.
  std::map<size_t, Prefetch> prefetched_;
  std::vector<Use> order_, trace_;
  bool prefetch_ok_ = true;
  int prefetch_hits_ = 0;
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
