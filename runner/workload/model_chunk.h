// A rank's piece of a built-in model, as the trainer and the pipeline schedules drive it: forward
// and backward per micro-batch, activations kept between them, the boundary tensor passed to the
// neighbouring pipeline stages. GptChunk and MlpChunk implement it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runner/device/tensor.h"
#include "runner/device/tracked_allocator.h"
#include "runner/workload/expert_load.h"

namespace partrain::runner {

// One micro-batch's inputs, in device memory where the ops read them (BatchSource fills them;
// category other: they are neither activations nor model states).
struct MicroBatch {
  TrackedBuffer tokens;      // gpt: B x T int32 token ids
  TrackedBuffer targets;     // gpt: B x T int32 next tokens
  TrackedBuffer features;    // mlp: B x H float inputs
  float dloss_scale = 1.0f;  // dL/d(per-element loss) for the whole global batch

  const int32_t* token_ids() const { return static_cast<const int32_t*>(tokens.data()); }
  const int32_t* target_ids() const { return static_cast<const int32_t*>(targets.data()); }
  const float* feature_values() const { return static_cast<const float*>(features.data()); }
};

// Which part of the model a chunk is.
struct ChunkPlacement {
  int chunk = 0;
  bool first = true;
  bool last = true;
  std::vector<int> layers;  // global layer indices, in order
};

class ModelChunk {
 public:
  virtual ~ModelChunk() = default;
  // Elements of the activation passed between pipeline stages, and their type: the type the
  // chunk keeps its activations in (bf16 under the bf16 recipes), for the activation and its
  // gradient alike, as Megatron's p2p moves both in the training dtype.
  virtual int64_t boundary_numel() const = 0;
  virtual ElementType boundary_type() const = 0;
  // First chunk: reads the batch, else `input`. Last chunk: writes the micro-batch's mean loss,
  // else `output`. Both boundary tensors (boundary_numel elements of boundary_type).
  virtual Status forward(int micro_batch, const MicroBatch& batch, const Tensor* input,
                         Tensor* output, float* loss) = 0;
  // Last chunk: starts from the loss, else from `grad_output`; not first: writes `grad_input`
  // (boundary tensors; the chunk computes the gradient in fp32 and rounds it only there).
  // `on_unit_ready` (may be empty) is told each parameter unit whose gradients are finished.
  virtual Status backward(int micro_batch, const MicroBatch& batch, const Tensor* grad_output,
                          Tensor* grad_input,
                          const std::function<void(const std::string&)>& on_unit_ready) = 0;
  // A mixture of experts: the routing of the forwards since the last call, per MoE block.
  virtual std::vector<ExpertLayerLoad> take_expert_loads() { return {}; }

  // The zero-bubble schedules (Qi 2023) split a backward in two: from now on backward computes
  // the input gradient and leaves the weight gradients it can defer (WeightGradients) to
  // weight_backward. A chunk that does not split keeps computing everything in backward, and
  // reports its units there; its weight_backward has nothing left to do.
  virtual void split_backward() {}
  // Runs what backward(micro_batch) left. `on_unit_ready` (may be empty), as for backward, is told
  // each unit whose gradients this pass has finished.
  virtual Status weight_backward(int micro_batch,
                                 const std::function<void(const std::string&)>& on_unit_ready) {
    (void)micro_batch;
    (void)on_unit_ready;
    return Status::ok();
  }
};

}  // namespace partrain::runner
