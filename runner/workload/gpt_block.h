// One GPT transformer block, forward and backward, on one rank's tensor-parallel shard:
// [LayerNorm -> QKV (column-parallel) -> causal attention over the local heads -> output
// projection (row-parallel) -> residual -> LayerNorm -> fc (column-parallel) -> GeLU -> proj
// (row-parallel) -> residual], with Megatron's f/g communication (and SP's all-gather /
// reduce-scatter) and the recompute modes: selective drops the attention probabilities, full
// keeps only the block's output and re-runs the forward in backward.
#pragma once

#include <array>
#include <optional>
#include <utility>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/workload/activation_store.h"
#include "runner/workload/gpt_specs.h"
#include "runner/workload/moe_mlp.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/unit_params.h"
#include "runner/workload/weight_gradients.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

// A micro-batch's full shape and the model's global widths.
struct GptShape {
  int64_t B = 1;   // samples
  int64_t T = 1;   // tokens per sample
  int64_t C = 1;   // hidden
  int64_t NH = 1;  // attention heads (global)
  int64_t F = 4;   // MLP width (global)
  int64_t V = 2;   // vocabulary (global)
};

// This rank's shard of a block's parameters as the ops read them (UnitParams: the matrices as
// stored, the vectors in fp32) and where their gradients accumulate, by GptBlockParam.
class BlockWeights {
 public:
  BlockWeights(UnitParams unit, const std::array<int64_t, kGptBlockParams>& offsets)
      : unit_(std::move(unit)), offsets_(offsets) {}
  Matrix matrix(GptBlockParam p) const { return unit_.matrix(offsets_[p]); }
  MutableMatrix matrix_grad(GptBlockParam p) const { return unit_.matrix_grad(offsets_[p]); }
  const float* vector(GptBlockParam p) const { return unit_.vector(offsets_[p]); }
  float* grad(GptBlockParam p) const { return unit_.grad(offsets_[p]); }  // a vector's
  // Adds the staged gradients into bf16 ones (UnitParams::flush): before the unit's release.
  void flush() {
    unit_.flush();
    if (experts_) experts_->flush();
  }
  // A mixture-of-experts block: its routed experts' unit, bound beside the block's (which holds
  // the router and the shared experts), and where each parameter sits.
  void bind_experts(UnitParams experts, const MoeOffsets* offsets) {
    experts_ = std::move(experts);
    moe_offsets_ = offsets;
  }
  // Its MoE weights; nullopt for a dense MLP.
  std::optional<MoeWeights> moe() const {
    if (!experts_) return std::nullopt;
    return MoeWeights{&unit_, &*experts_, moe_offsets_};
  }

 private:
  UnitParams unit_;
  std::array<int64_t, kGptBlockParams> offsets_;
  std::optional<UnitParams> experts_;
  const MoeOffsets* moe_offsets_ = nullptr;
};

// What a block keeps between its forward and backward for one micro-batch: the layernorm
// statistics in fp32, the rest in the ActivationStore's type.
struct BlockActivations {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, att, atty;  // ln1: sequence-sharded under SP
  Tensor x2, ln2, ln2_mean, ln2_rstd, fc, fc_gelu;
  Tensor out;  // the block's output: the next block's input
  MoeActivations moe;  // a mixture-of-experts block's, in place of fc and fc_gelu
  bool complete() const { return ln1.numel() > 0; }
};

class GptBlock {
 public:
  // `moe` (null for a dense model) runs the MLP of the blocks whose weights have experts.
  GptBlock(Device& device, TensorParallel& tp, GptShape shape, Recompute recompute,
           ActivationStore store, MoeMlp* moe = nullptr)
      : device_(device), tp_(tp), shape_(shape), recompute_(recompute), store_(store), moe_(moe) {}

  // x: the block input (saved by the caller in the store's type), local_tokens x C. Fills acts
  // (what the recompute mode keeps).
  Status forward(const BlockWeights& w, const Tensor& x, BlockActivations& acts);
  // dout: the gradient of acts.out; accumulates the parameter grads and adds into dx (the
  // input's gradient, local_tokens x C). Frees acts, but for what `weight_grads` keeps of them
  // when it defers the GEMMs' weight gradients (zero-bubble schedules).
  Status backward(const BlockWeights& w, const Tensor& x, BlockActivations& acts, const float* dout,
                  float* dx, WeightGradients& weight_grads);

 private:
  Status run_forward(const BlockWeights& w, const Tensor& x, BlockActivations& acts);
  // out = LayerNorm(x) over local_tokens rows, kept in the store's type (mean and rstd in fp32):
  // only the GEMM of the region it enters reads it, as stored.
  Status layernorm(const float* x, const float* weight, const float* bias, Tensor& out,
                   Tensor& mean, Tensor& rstd);
  // values = residual + g(in @ weight^T + bias): a row-parallel projection (in: B T x k, this
  // rank's slice of the inner dimension) summed over tp, then the residual, into `values`
  // (store_.output of the tensor the caller then stores or keeps).
  Status project_and_add(Matrix in, int64_t k, Matrix weight, const float* bias,
                         const float* residual, ActivationStore::Output& values);
  StatusOr<Tensor> scratch(std::vector<int64_t> shape);  // zeroed, workspace
  // The mixture of experts in the MLP's place: acts.out = x2 + g(moe(ln2)).
  Status moe_forward(const MoeWeights& moe, Matrix ln2_full, const float* x2, BlockActivations& a);
  // The dense MLP's backward from d_full (the output's gradient over the region): the gradient of
  // its input, ln2 over the region (`ln2`: the saved ln2, or gathered under SP, moved in for the
  // fc weight gradient).
  StatusOr<Tensor> mlp_backward(const BlockWeights& w, BlockActivations& a, Tensor ln2,
                                const float* d_full, WeightGradients& weight_grads);
  // A saved tensor-parallel region input (ln1, ln2) as its matmul reads it: as stored, or under
  // SP gathered over tp into `gathered` (fp32).
  StatusOr<Matrix> region_operand(const Tensor& saved, Tensor& gathered);

  Device& device_;
  TensorParallel& tp_;
  GptShape shape_;
  Recompute recompute_;
  ActivationStore store_;
  MoeMlp* moe_;
};

}  // namespace partrain::runner
