#include "runner/workload/mlp_chunk.h"

#include <fmt/format.h>

#include "profiler/trace_scope.h"
#include "runner/workload/param_init.h"

namespace partrain::runner {

using memory::Category;

std::vector<ParamSpec> mlp_layer_specs(int hidden, int layer) {
  const TpSplit split = layer % 2 == 0 ? TpSplit::kColumn : TpSplit::kRow;
  return {{fmt::format("mlp{}.w", layer), 100 + static_cast<uint64_t>(layer), {hidden, hidden},
           split, InitKind::kFanIn, false}};
}

void mlp_features(uint64_t seed, uint64_t index, int hidden, float* out) {
  constexpr uint64_t kFeatureStream = 0xfea7;  // a parameter id no weight uses
  for (int j = 0; j < hidden; ++j) {
    out[j] = init_normal(seed, kFeatureStream,
                         index * static_cast<uint64_t>(hidden) + static_cast<uint64_t>(j));
  }
}

MlpChunk::MlpChunk(Device& device, TensorParallel& tp, int64_t micro_batch, int64_t hidden,
                   Recompute recompute, const ParamLayout& layout, ParamAccess& access,
                   ChunkPlacement placement, ElementType activations,
                   profiler::RankTracer* tracer)
    : device_(device),
      tp_(tp),
      B_(micro_batch),
      H_(hidden),
      recompute_(recompute),
      access_(access),
      placement_(std::move(placement)),
      store_(device, activations),
      tracer_(tracer) {
  for (int layer : placement_.layers) {
    units_.push_back(layout.unit_of(fmt::format("mlp{}.w", layer)));
  }
}

StatusOr<Tensor> MlpChunk::tensor(std::vector<int64_t> shape, Category category) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(device_.allocator(), std::move(shape), category));
  device_.fill(t.data(), t.numel(), 0.0f);
  return t;
}

Status MlpChunk::layer_forward(size_t i, Matrix w, Layer& layer, bool recomputing) {
  const int layer_index = placement_.layers[i];
  const int64_t width = column_parallel(layer_index) ? H_ / tp_.size() : H_;
  const int64_t in = row_parallel(layer_index) ? H_ / tp_.size() : H_;
  ASSIGN_OR_RETURN(layer.pre, store_.create({B_, width}));
  ASSIGN_OR_RETURN(ActivationStore::Output pre, store_.output(layer.pre));
  {
    ASSIGN_OR_RETURN(ActivationStore::Input x, store_.input(layer.input));
    if (row_parallel(layer_index)) {
      // x is this rank's slice of the column-parallel layer's output; the products are partial.
      ASSIGN_OR_RETURN(Tensor partial, tensor({B_, H_}, Category::kWorkspace));
      device_.matmul_forward(partial.data(), x.data(), w, nullptr, B_, in, H_);
      RETURN_IF_ERROR(tp_.exit_forward(partial.data(), pre.data(), B_, 1, H_));
    } else {
      device_.matmul_forward(pre.data(), x.data(), w, nullptr, B_, in, width);
    }
  }
  store_.store(pre, layer.pre);
  if (recomputing) return Status::ok();  // the backward reads the GeLU's input, not its output
  ASSIGN_OR_RETURN(layer.out, store_.create({B_, width}));
  ASSIGN_OR_RETURN(ActivationStore::Output out, store_.output(layer.out));
  device_.gelu_forward(out.data(), pre.data(), B_ * width);
  store_.keep(std::move(out), layer.out);  // the next layer copies it as its input
  return Status::ok();
}

Status MlpChunk::forward(int micro_batch, const MicroBatch& batch, const Tensor* input,
                         Tensor* output, float* loss) {
  std::vector<Layer>& layers = in_flight_[micro_batch];
  layers.resize(placement_.layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    profiler::TraceScope scope(tracer_, "layer.forward", profiler::SliceCategory::kCompute,
                               placement_.layers[i], micro_batch);
    const int64_t in = row_parallel(placement_.layers[i]) ? H_ / tp_.size() : H_;
    ASSIGN_OR_RETURN(layers[i].input, store_.create({B_, in}));
    if (i > 0) {
      RETURN_IF_ERROR(store_.copy(layers[i].input, layers[i - 1].out));
      // The copy is what this layer keeps; autograd would keep one tensor here, not two.
      layers[i - 1].out = Tensor();
    } else if (placement_.first) {
      store_.assign(layers[i].input, batch.feature_values());
    } else {
      RETURN_IF_ERROR(store_.copy(layers[i].input, *input));
    }
    ASSIGN_OR_RETURN(UnitView view, access_.acquire(units_[i], Pass::kForward));
    RETURN_IF_ERROR(layer_forward(i, matrix_at(view, 0), layers[i], false));
    RETURN_IF_ERROR(access_.release(units_[i], Pass::kForward));
    // Only each layer's input survives (the last output feeds the loss or the next stage).
    if (recompute_ == Recompute::kFull) layers[i].pre = Tensor();
  }
  if (placement_.last) {
    ASSIGN_OR_RETURN(ActivationStore::Input y, store_.input(layers.back().out));
    *loss = device_.mean_square_loss_forward(y.data(), B_ * H_);
    return Status::ok();
  }
  RETURN_IF_ERROR(store_.copy(*output, layers.back().out));
  // The next stage has it and this stage's backward starts from its gradient: freed after the
  // send, as Megatron-LM's deallocate_output_tensor frees a stage's output.
  layers.back().out = Tensor();
  return Status::ok();
}

Status MlpChunk::backward(int micro_batch, const MicroBatch& batch, const Tensor* grad_output,
                          Tensor* grad_input,
                          const std::function<void(const std::string&)>& on_unit_ready) {
  auto found = in_flight_.find(micro_batch);
  if (found == in_flight_.end()) {
    return failed("backward of micro-batch {} on chunk {} before its forward", micro_batch,
                  placement_.chunk);
  }
  std::vector<Layer>& layers = found->second;
  ASSIGN_OR_RETURN(Tensor dy, tensor({B_, H_}, Category::kWorkspace));
  if (placement_.last) {
    ASSIGN_OR_RETURN(ActivationStore::Input y, store_.input(layers.back().out));
    device_.mean_square_loss_backward(dy.data(), y.data(), B_ * H_, batch.dloss_scale);
  } else {
    store_.copy_out(dy.data(), *grad_output);
  }
  for (size_t i = layers.size(); i-- > 0;) {
    const int layer_index = placement_.layers[i];
    profiler::TraceScope scope(tracer_, "layer.backward", profiler::SliceCategory::kCompute,
                               layer_index, micro_batch);
    Layer& layer = layers[i];
    ASSIGN_OR_RETURN(UnitView view, access_.acquire(units_[i], Pass::kBackward));
    if (layer.pre.numel() == 0) RETURN_IF_ERROR(layer_forward(i, matrix_at(view, 0), layer, true));
    const int64_t width = column_parallel(layer_index) ? H_ / tp_.size() : H_;
    const int64_t in = row_parallel(layer_index) ? H_ / tp_.size() : H_;
    ASSIGN_OR_RETURN(Tensor dpre, tensor({B_, width}, Category::kWorkspace));
    {
      ASSIGN_OR_RETURN(ActivationStore::Input pre, store_.input(layer.pre));
      device_.gelu_backward(dpre.data(), pre.data(), dy.data(), B_ * width);
    }
    ASSIGN_OR_RETURN(Tensor dx, tensor({B_, in}, Category::kWorkspace));
    ASSIGN_OR_RETURN(ActivationStore::Input x, store_.input(layer.input));
    if (column_parallel(layer_index)) {
      // The input was replicated: its gradient is summed over the ranks' output slices.
      ASSIGN_OR_RETURN(Tensor partial, tensor({B_, H_}, Category::kWorkspace));
      device_.matmul_backward(partial.data(), matrix_grad_at(view, 0), nullptr, dpre.data(),
                              x.data(), matrix_at(view, 0), B_, in, width);
      RETURN_IF_ERROR(tp_.enter_backward(partial.data(), dx.data(), B_, 1, H_));
    } else {
      device_.matmul_backward(dx.data(), matrix_grad_at(view, 0), nullptr, dpre.data(), x.data(),
                              matrix_at(view, 0), B_, in, width);
    }
    RETURN_IF_ERROR(access_.release(units_[i], Pass::kBackward));
    dy = std::move(dx);
    layer = Layer();
    if (on_unit_ready) on_unit_ready(fmt::format("layer{}", layer_index));
  }
  if (!placement_.first) store_.assign(*grad_input, dy.data());
  in_flight_.erase(found);
  return Status::ok();
}

}  // namespace partrain::runner
