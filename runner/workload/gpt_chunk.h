// A chunk of the GPT on one rank: a pipeline stage (or virtual stage) of consecutive blocks, with
// the embedding when it is the first chunk and the final norm, tied LM head and cross-entropy when
// it is the last. Runs forward and backward per micro-batch and keeps each micro-batch's
// activations until its backward, as a pipeline schedule needs. Parameters are acquired from a
// ParamAccess around each use of their unit, so FSDP can gather and free them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "profiler/rank_tracer.h"
#include "runner/workload/gpt_block.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/unit_params.h"

namespace partrain::runner {

// A mixture of experts' wiring for a chunk: the layout and access of this rank's routed experts
// (its ep share, one unit per MoE block), the groups the MoE MLP talks to and its options.
struct ExpertWiring {
  const ParamLayout* layout = nullptr;
  ParamAccess* access = nullptr;
  comm::Comm* ep = nullptr;    // the expert-parallel group
  comm::Comm* data = nullptr;  // the ranks that split the micro-batch (dp)
  MoeOptions options;
};

class GptChunk final : public ModelChunk {
 public:
  // `access` hands out the parameters and gradients of `layout`'s units; `activations` is the
  // element type the chunk keeps its activations in; `tracer` (null: not traced) records each
  // block's forward and backward; `experts` (null: a dense model) wires the MoE blocks.
  GptChunk(Device& device, TensorParallel& tp, GptShape shape, Recompute recompute,
           const ParamLayout& layout, ParamAccess& access, ChunkPlacement placement,
           ElementType activations, profiler::RankTracer* tracer,
           const ExpertWiring* experts = nullptr);

  // Elements of the activation passed between pipeline stages (local tokens x C).
  int64_t boundary_numel() const override {
    return tp_.local_tokens(shape_.B, shape_.T) * shape_.C;
  }

  ElementType boundary_type() const override { return store_.type(); }

  // First chunk: reads batch.tokens, else `input`. Last chunk: writes the micro-batch's mean
  // loss, else `output`.
  Status forward(int micro_batch, const MicroBatch& batch, const Tensor* input, Tensor* output,
                 float* loss) override;
  // Last chunk: starts from the loss, else from `grad_output`; not first: writes `grad_input`.
  // `on_unit_ready` (may be empty) is told each parameter unit ("final", "layer3", "embedding")
  // whose gradients this backward has finished: DDP launches its buckets from it.
  Status backward(int micro_batch, const MicroBatch& batch, const Tensor* grad_output,
                  Tensor* grad_input,
                  const std::function<void(const std::string&)>& on_unit_ready) override;
  // Split: the blocks' GEMM weight gradients wait for weight_backward; the embedding's, the
  // head's and the norms' (cheap, or scattered) stay in backward.
  void split_backward() override { split_ = true; }
  Status weight_backward(int micro_batch,
                         const std::function<void(const std::string&)>& on_unit_ready) override;

  std::vector<ExpertLayerLoad> take_expert_loads() override {
    return moe_ ? moe_->take_loads() : std::vector<ExpertLayerLoad>();
  }

 private:
  struct Head {
    Tensor lnf;  // in the store's type; the statistics and the logits in fp32
    Tensor mean, rstd, logits, max, sum_exp;
  };
  struct InFlight {
    Tensor input;  // the first block's input (the embedding output on the first chunk), stored
    std::vector<BlockActivations> blocks;
    Head head;
  };

  // Where a parameter sits: its unit and its offset inside the unit.
  struct ParamRef {
    size_t unit = 0;
    int64_t offset = 0;
  };
  // A named parameter of an acquired unit, as the ops read it (UnitParams).
  struct Bound {
    UnitParams unit;
    int64_t offset = 0;
    Matrix matrix() const { return unit.matrix(offset); }
    MutableMatrix matrix_grad() const { return unit.matrix_grad(offset); }
    const float* vector() const { return unit.vector(offset); }
    float* grad() const { return unit.grad(offset); }  // a vector's; null when none are kept
  };
  struct BlockRefs {
    size_t unit = 0;
    std::array<int64_t, kGptBlockParams> offsets{};
    std::optional<MoeOffsets> moe;  // an MoE block's router and experts
    size_t experts_unit = 0;        // in the experts' layout
  };
  // Where block `layer`'s MoE parameters sit (its unit `refs.unit`).
  MoeOffsets moe_offsets(int layer, const BlockRefs& refs) const;
  // Acquire / release the unit of a named parameter (wte, wpe, lnfw, lnfb) or of block i; the
  // release first adds the use's staged gradients into bf16 ones (UnitParams::flush).
  StatusOr<Bound> bind(const std::string& name, Pass pass);
  Status unbind(Bound& bound, const std::string& name, Pass pass);
  StatusOr<BlockWeights> bind_block(size_t i, Pass pass);
  Status unbind_block(BlockWeights& w, size_t i, Pass pass);
  Status embed_forward(const MicroBatch& batch, Tensor& x0);
  Status embed_backward(const MicroBatch& batch, const float* dx0);
  Status head_forward(const MicroBatch& batch, const Tensor& x, Head& head, float* loss);
  Status head_backward(const MicroBatch& batch, const Tensor& x, Head& head, float* dx);
  StatusOr<Tensor> tensor(std::vector<int64_t> shape, memory::Category category);
  // The chunk's units in the order backward finishes them: final, head, layers last to first,
  // embedding.
  void report_units(const std::function<void(const std::string&)>& on_unit_ready) const;

  Device& device_;
  TensorParallel& tp_;
  GptShape shape_;
  const ParamLayout& layout_;
  ParamAccess& access_;
  ChunkPlacement placement_;
  ActivationStore store_;
  const ExpertWiring* experts_;
  std::unique_ptr<MoeMlp> moe_;  // null for a dense model
  GptBlock block_;
  std::map<std::string, ParamRef> refs_;
  std::vector<BlockRefs> blocks_;
  std::map<int, InFlight> in_flight_;
  bool split_ = false;
  std::map<int, WeightGradients> deferred_;  // split: per micro-batch, until its W
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
