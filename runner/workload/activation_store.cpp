#include "runner/workload/activation_store.h"

namespace partrain::runner {

using memory::Category;

namespace {

StatusOr<Tensor> fp32_workspace(Device& device, const Tensor& like) {
  return Tensor::create(device.allocator(), like.shape(), Category::kWorkspace);
}

}  // namespace

StatusOr<Tensor> ActivationStore::create(std::vector<int64_t> shape) const {
  return Tensor::create(device_.allocator(), std::move(shape), Category::kActivations, type_);
}

StatusOr<ActivationStore::Output> ActivationStore::output(Tensor& saved) const {
  Output values;
  if (saved.type() == ElementType::kF32) {
    values.data_ = saved.data();
    return values;
  }
  ASSIGN_OR_RETURN(values.workspace_, fp32_workspace(device_, saved));
  values.data_ = values.workspace_.data();
  return values;
}

void ActivationStore::store(Output& values, Tensor& saved) const {
  if (saved.type() == ElementType::kF32) return;
  device_.store_bf16(saved.bf16_data(), values.data_, saved.numel());
}

void ActivationStore::keep(Output values, Tensor& saved) const {
  if (saved.type() == ElementType::kF32) return;
  device_.to_bf16(saved.bf16_data(), values.data_, saved.numel());
}

StatusOr<ActivationStore::Input> ActivationStore::input(const Tensor& saved) const {
  Input values;
  if (saved.type() == ElementType::kF32) {
    values.data_ = saved.data();
    return values;
  }
  ASSIGN_OR_RETURN(values.workspace_, fp32_workspace(device_, saved));
  device_.from_bf16(values.workspace_.data(), saved.bf16_data(), saved.numel());
  values.data_ = values.workspace_.data();
  return values;
}

Matrix ActivationStore::operand(const Tensor& saved) {
  if (saved.type() == ElementType::kBf16) return saved.bf16_data();
  return saved.data();
}

MutableMatrix ActivationStore::target(Tensor& saved) {
  if (saved.type() == ElementType::kBf16) return saved.bf16_data();
  return saved.data();
}

void ActivationStore::assign(Tensor& saved, const float* source) const {
  if (saved.type() == ElementType::kF32) {
    device_.copy(saved.data(), source, saved.numel());
  } else {
    device_.to_bf16(saved.bf16_data(), source, saved.numel());
  }
}

void ActivationStore::copy_out(float* destination, const Tensor& saved) const {
  if (saved.type() == ElementType::kF32) {
    device_.copy(destination, saved.data(), saved.numel());
  } else {
    device_.from_bf16(destination, saved.bf16_data(), saved.numel());
  }
}

Status ActivationStore::copy(Tensor& destination, const Tensor& source) const {
  if (destination.type() != source.type() || destination.numel() != source.numel()) {
    return failed("activation copy of {} {} element(s) into {} {}: source and destination "
                  "must match in type and size",
                  source.numel(), source.type() == ElementType::kBf16 ? "bf16" : "fp32",
                  destination.numel(), destination.type() == ElementType::kBf16 ? "bf16" : "fp32");
  }
  if (source.type() == ElementType::kF32) {
    device_.copy(destination.data(), source.data(), source.numel());
  } else {
    device_.copy_bf16(destination.bf16_data(), source.bf16_data(), source.numel());
  }
  return Status::ok();
}

}  // namespace partrain::runner
