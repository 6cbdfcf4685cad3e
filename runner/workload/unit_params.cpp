#include "runner/workload/unit_params.h"

namespace partrain::runner {

Weight matrix_at(const UnitView& view, int64_t offset) {
  if (view.bf16_params != nullptr) return Weight{nullptr, view.bf16_params + offset};
  return Weight{view.params + offset, nullptr};
}

WeightGrad matrix_grad_at(const UnitView& view, int64_t offset) {
  if (view.bf16_grads != nullptr) return WeightGrad{nullptr, view.bf16_grads + offset};
  return WeightGrad{view.grads != nullptr ? view.grads + offset : nullptr, nullptr};
}

StatusOr<UnitParams> UnitParams::bind(Device& device, const UnitView& view,
                                      const ParamUnit& unit) {
  UnitParams bound;
  bound.device_ = &device;
  bound.unit_ = &unit;
  bound.view_ = view;
  if (view.bf16_params == nullptr) return bound;
  int64_t vector_numel = 0;
  for (const LocalParam& param : unit.params) {
    if (param.local_shape.size() == 1) vector_numel += param.numel;
  }
  if (vector_numel == 0) return bound;
  ASSIGN_OR_RETURN(bound.widened_, Tensor::create(device.allocator(), {vector_numel},
                                                  memory::Category::kWorkspace));
  int64_t at = 0;
  for (const LocalParam& param : unit.params) {
    if (param.local_shape.size() != 1) continue;
    const int64_t offset = param.offset - unit.offset;
    device.from_bf16(bound.widened_.data() + at, view.bf16_params + offset, param.numel);
    bound.widened_at_.emplace_back(offset, at);
    at += param.numel;
    if (view.bf16_grads != nullptr) RETURN_IF_ERROR(bound.fp32_grad(offset).status());
  }
  return bound;
}

const float* UnitParams::vector(int64_t offset) const {
  if (view_.bf16_params == nullptr) return view_.params + offset;
  for (const auto& [unit_offset, at] : widened_at_) {
    if (unit_offset == offset) return widened_.data() + at;
  }
  return nullptr;
}

float* UnitParams::grad(int64_t offset) const {
  if (view_.bf16_grads == nullptr) return view_.grads != nullptr ? view_.grads + offset : nullptr;
  for (const Staged& staged : staged_) {
    if (staged.offset == offset) return staged.data;
  }
  return nullptr;
}

StatusOr<float*> UnitParams::fp32_grad(int64_t offset) {
  if (view_.bf16_grads == nullptr) return view_.grads != nullptr ? view_.grads + offset : nullptr;
  if (float* staged = grad(offset)) return staged;
  int64_t numel = -1;
  for (const LocalParam& param : unit_->params) {
    if (param.offset - unit_->offset == offset) numel = param.numel;
  }
  if (numel < 0) {
    return failed("no parameter of unit {} starts at element {}: nothing to stage a gradient for",
                  unit_->name, offset);
  }
  ASSIGN_OR_RETURN(Tensor grads, Tensor::create(device_->allocator(), {numel},
                                                memory::Category::kWorkspace));
  device_->fill(grads.data(), numel, 0.0f);
  float* data = grads.data();
  staged_.push_back(Staged{offset, std::move(grads), data});
  return data;
}

void UnitParams::flush() {
  for (Staged& staged : staged_) {
    device_->accumulate_bf16(view_.bf16_grads + staged.offset, staged.grads.data(),
                             staged.grads.numel());
  }
  staged_.clear();
}

void matmul_forward(Device& device, float* out, Activation inp, Weight weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC) {
  if (inp.bf16 != nullptr) {
    device.matmul_forward(out, inp.bf16, weight.bf16, bias, N, C, OC);
  } else if (weight.bf16 != nullptr) {
    device.matmul_forward(out, inp.f32, weight.bf16, bias, N, C, OC);
  } else {
    device.matmul_forward(out, inp.f32, weight.f32, bias, N, C, OC);
  }
}

void matmul_backward(Device& device, float* dinp, WeightGrad dweight, float* dbias,
                     const float* dout, Activation inp, Weight weight, int64_t N, int64_t C,
                     int64_t OC) {
  if (inp.bf16 != nullptr && dweight.bf16 != nullptr) {
    device.matmul_backward_into_bf16(dinp, dweight.bf16, dbias, dout, inp.bf16, weight.bf16, N,
                                     C, OC);
  } else if (inp.bf16 != nullptr) {
    device.matmul_backward(dinp, dweight.f32, dbias, dout, inp.bf16, weight.bf16, N, C, OC);
  } else if (dweight.bf16 != nullptr) {
    device.matmul_backward_into_bf16(dinp, dweight.bf16, dbias, dout, inp.f32, weight.bf16, N, C,
                                     OC);
  } else if (weight.bf16 != nullptr) {
    device.matmul_backward(dinp, dweight.f32, dbias, dout, inp.f32, weight.bf16, N, C, OC);
  } else {
    device.matmul_backward(dinp, dweight.f32, dbias, dout, inp.f32, weight.f32, N, C, OC);
  }
}

void embedding_forward_vocab_range(Device& device, float* out, const int32_t* tokens,
                                   Weight wte_shard, Weight wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end) {
  if (wte_shard.bf16 != nullptr) {
    device.embedding_forward_vocab_range(out, tokens, wte_shard.bf16, wpe.bf16, B, T, C,
                                         vocab_start, vocab_end);
  } else {
    device.embedding_forward_vocab_range(out, tokens, wte_shard.f32, wpe.f32, B, T, C,
                                         vocab_start, vocab_end);
  }
}

}  // namespace partrain::runner
