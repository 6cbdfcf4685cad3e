// The parameters a rank holds, as one flat buffer: which global tensors exist (name, shape, how
// tensor parallelism splits them, how they start), which of them this rank's pipeline chunks and
// tensor-parallel shard own, and where each local piece sits. One flat buffer for params and one
// with the same layout for grads is what DDP buckets and ZeRO shards slice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace partrain::runner {

// How Megatron tensor parallelism splits a parameter over the tp ranks.
enum class TpSplit {
  kReplicated,  // every tp rank holds all of it (layernorms, row-parallel biases, wpe)
  kColumn,      // output features split: rows [r0, r1) of a (out, in) weight or its bias
  kRow,         // input features split: columns [c0, c1) of a (out, in) weight
  kQkv,         // the fused (3C, C) QKV weight or (3C) bias: each of Q, K, V split by heads
};

// kFanIn: N(0, 2/in_features) (He et al. 2015), keeping a deep GeLU MLP's activations alive.
enum class InitKind { kNormal, kResidualNormal, kFanIn, kOnes, kZeros };

struct ParamSpec {
  std::string name;            // "wte", "layer3.qkvw", ...
  uint64_t id = 0;             // stable across layouts: seeds the parameter's initial values
  std::vector<int64_t> shape;  // global (unsharded) shape
  TpSplit split = TpSplit::kReplicated;
  InitKind init = InitKind::kNormal;
  // Replicated, yet its gradient is a partial sum per tp rank under sequence parallelism (its
  // input is split along the sequence): the grads are summed over the tp group.
  bool partial_grad_under_sp = false;
};

struct LocalParam {
  ParamSpec spec;
  std::vector<int64_t> local_shape;
  int64_t offset = 0;  // in the rank's flat buffer, in elements
  int64_t numel = 0;
};

// A group of parameters used together (the embedding, one transformer layer, the final norm):
// FSDP gathers and frees a unit at a time; DDP buckets fill unit by unit in reverse.
struct ParamUnit {
  std::string name;
  int chunk = 0;  // the model chunk (pipeline stage or virtual stage) it belongs to
  std::vector<LocalParam> params;
  int64_t offset = 0;
  int64_t numel = 0;
};

struct TpShard {
  int rank = 0;
  int size = 1;
};

class ParamLayout {
 public:
  // Appends a unit holding `specs`, sharded for `tp`; offsets continue the flat buffer.
  void add_unit(std::string name, int chunk, const std::vector<ParamSpec>& specs, TpShard tp);

  const std::vector<ParamUnit>& units() const { return units_; }
  int64_t numel() const { return numel_; }
  const LocalParam* find(const std::string& name) const;

  // The initial values of unit `index`'s local parameters (its numel floats, unit-local, in host
  // memory for the caller to upload), from the global-coordinate initialiser: identical values
  // for identical global elements on any layout.
  std::vector<float> unit_initial_values(size_t index, uint64_t seed, int layers,
                                         TpShard tp) const;
  // The index of the unit holding parameter `name`, or units().size() when there is none.
  size_t unit_of(const std::string& name) const;

 private:
  std::vector<ParamUnit> units_;
  int64_t numel_ = 0;
};

// The local shape of a parameter on tp rank `tp`.
std::vector<int64_t> local_shape(const ParamSpec& spec, TpShard tp);
// The global flat index of local element `local_index` of `spec` on tp rank `tp`.
int64_t global_index(const ParamSpec& spec, TpShard tp, int64_t local_index);

}  // namespace partrain::runner
