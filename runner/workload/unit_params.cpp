#include "runner/workload/unit_params.h"

namespace partrain::runner {

Matrix matrix_at(const UnitView& view, int64_t offset) {
  if (view.bf16_params != nullptr) return view.bf16_params + offset;
  return view.params + offset;
}

MutableMatrix matrix_grad_at(const UnitView& view, int64_t offset) {
  if (view.bf16_grads != nullptr) return view.bf16_grads + offset;
  if (view.grads != nullptr) return view.grads + offset;
  return nullptr;
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

}  // namespace partrain::runner
