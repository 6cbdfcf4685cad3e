// Data parallelism over the dp group, owning the rank's params, grads and AdamW states:
// DDP (every rank keeps everything; gradient buckets all-reduced during backward) or ZeRO-1
// (Rajbhandari et al. 2020: optimizer states sharded; gradients reduce-scattered after backward,
// each rank updates its shard, parameters all-gathered) over flat buffers; ZeRO-2 and FSDP are
// delegated to ShardedState. The chunks reach parameters through it (ParamAccess), and it is
// the one place that knows which rank owns which element, so norms count each exactly once. How
// the states are stored (fp32, or bf16 beside an fp32 master) is StateStorage's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/workload/bf16_states.h"
#include "runner/workload/ddp_buckets.h"
#include "runner/workload/mesh.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/sharded_state.h"
#include "runner/workload/tensor_parallel.h"

namespace partrain::runner {

class DataParallel final : public ParamAccess {
 public:
  // Allocates params (initialised from `seed`), grads and optimizer states for `layout`, as
  // `resolved`'s ZeRO stage shards them over `group` (null: the mesh's ZeRO shard group, its dp
  // group unless the layout is a hybrid; a mixture of experts' routed experts: the expert-data
  // group); DDP reduces in buckets of `bucket_bytes`.
  // `tracer` (null: not traced) records the optimizer's steps.
  static StatusOr<std::unique_ptr<DataParallel>> create(Device& device, const ParamLayout& layout,
                                                        const ResolvedLayout& resolved,
                                                        int64_t bucket_bytes, Mesh& mesh,
                                                        TensorParallel& tp, uint64_t seed,
                                                        int layers, StateStorage storage = {},
                                                        profiler::RankTracer* tracer = nullptr,
                                                        comm::Comm* group = nullptr);

  // DDP and ZeRO-1: views into the flat buffers, release a no-op (DDP learns of finished units
  // through unit_ready). bf16 storage (StateStorage): the bf16 parameters as stored, and under
  // bf16 gradients a backward use gets the bf16 gradients to add into (UnitParams). ZeRO-2 and
  // FSDP: see ShardedState.
  StatusOr<UnitView> acquire(size_t unit, Pass pass) override;
  Status release(size_t unit, Pass pass) override;

  void zero_grads();

  // For the step's last micro-batch: backward reports each finished unit here (DDP buckets).
  void unit_ready(const std::string& unit);
  // After the step's backward: DDP waits for its buckets; ZeRO reduce-scatters; under SP the
  // layernorm grads are summed over tp.
  Status reduce_gradients();
  // Sum over the world of squared gradients / parameters, each element counted once.
  StatusOr<double> grad_norm_squared() { return owned_sum_of_squares(false); }
  StatusOr<double> param_norm_squared() { return owned_sum_of_squares(true); }
  // Steps AdamW on the grads this rank updates, each multiplied by grad_scale inside the update
  // (clipping; the grads themselves are left as they are), and (ZeRO) all-gathers params.
  Status update(const ops::AdamWConfig& adam, int64_t step, float grad_scale);

  size_t bucket_count() const { return ddp_ ? ddp_->bucket_count() : 0; }

  // Pipelines with a tied LM head: the first and the last stage each hold wte; `group` (those two
  // stages) sums their wte gradients so both copies take the same step (Megatron's embedding
  // group). The last stage's copy (unit "head") is not counted in norms.
  void set_tied_embedding_group(comm::Comm* group) { tied_group_ = group; }

  // A mixture of experts: the routed experts' states, reduced over the expert-data group. The
  // step's calls (zero_grads, reduce_gradients, the norms, update) then cover them too, the norms
  // in the same one all-reduce over the world. `experts` must outlive this object's use.
  void attach_experts(DataParallel* experts) { experts_ = experts; }

 private:

  DataParallel(Device& device, const ParamLayout& layout, const ResolvedLayout& resolved,
               Mesh& mesh, comm::Comm& data, TensorParallel& tp, StateStorage storage,
               profiler::RankTracer* tracer)
      : device_(device),
        layout_(layout),
        resolved_(resolved),
        mesh_(mesh),
        data_(data),
        tp_(tp),
        storage_(storage),
        world_values_(device, mesh.world()),
        holds_(layout.units().size(), 0),
        tracer_(tracer) {}
  Status initialise_params(uint64_t seed, int layers);
  StatusOr<double> owned_sum_of_squares(bool params);
  // This rank's part of it, before the sum over the world.
  StatusOr<double> local_sum_of_squares(bool params);
  // Sum of squares over the flat elements this rank counts, of `values` (fp32 or bf16), which
  // holds flat elements [first, ...).
  StatusOr<double> flat_owned_squares(Tensor& values, int64_t first);
  // The ranks holding the same elements as this one, among which the norms' work is split.
  NormShare norm_share() const;

  Device& device_;
  const ParamLayout& layout_;
  const ResolvedLayout& resolved_;
  Mesh& mesh_;
  comm::Comm& data_;  // the ranks the states are replicated (DDP) or sharded (ZeRO) over
  // A hybrid ZeRO (HSDP): the ranks holding the same shard, which all-reduce its gradients; null
  // otherwise.
  comm::Comm* replicas_ = nullptr;
  TensorParallel& tp_;
  StateStorage storage_;
  comm::HostValueCollectives world_values_;  // the norms' sums over the world
  Tensor params_, grads_, adam_m_, adam_v_;
  Tensor master_;  // bf16 storage: the fp32 master of this rank's shard (optimizer category)
  std::vector<int> holds_;  // bf16 storage: how many uses hold each unit
  int64_t shard_begin_ = 0;  // the flat elements this rank updates: [begin, end)
  int64_t shard_end_ = 0;
  std::unique_ptr<DdpBuckets> ddp_;
  std::unique_ptr<ShardedState> sharded_;  // ZeRO-2 and FSDP; the flat buffers stay empty
  comm::Comm* tied_group_ = nullptr;
  DataParallel* experts_ = nullptr;
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
