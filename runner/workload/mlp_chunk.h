// The lecture's deep MLP as a model chunk: L layers of y = GeLU(x @ W^T) with square (H, H)
// weights and loss = mean of squares of the last output. Under tensor parallelism layers pair up
// as in Megatron's MLP: an even layer is column-parallel (its output split over tp), the next
// row-parallel (its partial outputs summed), so each pair costs one all-reduce forward and one
// backward.
#pragma once

#include <map>
#include <vector>

#include "profiler/rank_tracer.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/workload/activation_store.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/unit_params.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

std::vector<ParamSpec> mlp_layer_specs(int hidden, int layer);

// The deterministic input features of sample `index`: H standard normal values.
void mlp_features(uint64_t seed, uint64_t index, int hidden, float* out);

class MlpChunk final : public ModelChunk {
 public:
  // `activations`: the element type the chunk keeps its activations in; `tracer` (null: not
  // traced) records each layer's forward and backward.
  MlpChunk(Device& device, TensorParallel& tp, int64_t micro_batch, int64_t hidden,
           Recompute recompute, const ParamLayout& layout, ParamAccess& access,
           ChunkPlacement placement, ElementType activations, profiler::RankTracer* tracer);

  int64_t boundary_numel() const override { return B_ * H_; }
  ElementType boundary_type() const override { return store_.type(); }
  Status forward(int micro_batch, const MicroBatch& batch, const Tensor* input, Tensor* output,
                 float* loss) override;
  Status backward(int micro_batch, const MicroBatch& batch, const Tensor* grad_output,
                  Tensor* grad_input,
                  const std::function<void(const std::string&)>& on_unit_ready) override;

 private:
  struct Layer {  // each in the store's type
    Tensor input;  // full (B, H): the layer's input
    Tensor pre;    // before GeLU: (B, H/tp) column-parallel, (B, H) otherwise
    Tensor out;    // after GeLU, same shape as pre
  };
  bool column_parallel(int layer) const { return tp_.size() > 1 && layer % 2 == 0; }
  bool row_parallel(int layer) const { return tp_.size() > 1 && layer % 2 == 1; }
  // w: the layer's weight, acquired by the caller; fills layer.pre and layer.out from
  // layer.input.
  // `recomputing`: the backward's recompute, which needs only the GeLU's input.
  Status layer_forward(size_t i, Matrix w, Layer& layer, bool recomputing);
  StatusOr<Tensor> tensor(std::vector<int64_t> shape, memory::Category category);

  Device& device_;
  TensorParallel& tp_;
  int64_t B_;
  int64_t H_;
  Recompute recompute_;
  ParamAccess& access_;
  ChunkPlacement placement_;
  ActivationStore store_;
  std::vector<size_t> units_;  // each layer's parameter unit (its weight is the whole unit)
  std::map<int, std::vector<Layer>> in_flight_;
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
