#include "memory/model_states.h"

#include <optional>

namespace partrain::memory {

// Byte counts: ZeRO 2019 sec. 3.1 (mixed-precision Adam: 2 + 2 + 12); Megatron-LM's
// --accumulate-allreduce-grads-in-fp32 keeps fp32 gradients (18) and DeepSpeed's
// fp32 gradient accumulation keeps a second, fp32 buffer (20).
StatusOr<PrecisionRecipe> precision_recipe(std::string_view name, Optimizer optimizer) {
  const bool adam = optimizer == Optimizer::kAdamW;
  const double states = adam ? 8 : 0;  // Adam m and v in fp32; plain SGD none
  if (name == "fp32-adam" || name == "fp32") {
    // Named for the optimizer it keeps state for: under SGD "fp32-adam" read as 8 bytes of Adam.
    return PrecisionRecipe{adam ? "fp32-adam" : "fp32-sgd", 4, 4, states, 4};
  }
  if (name == "bf16-mixed" || name == "bf16") return PrecisionRecipe{"bf16-mixed", 2, 2, 4 + states, 2};
  // fp16 with a loss scale (Megatron-LM's --fp16, DeepSpeed's fp16): bf16-mixed's bytes, and the
  // same tensor-core peak on A100 and H100.
  if (name == "fp16-mixed" || name == "fp16")
    return PrecisionRecipe{"fp16-mixed", 2, 2, 4 + states, 2};
  if (name == "bf16-fp32grad") return PrecisionRecipe{"bf16-fp32grad", 2, 4, 4 + states, 2};
  if (name == "bf16-fp32grad-accum") {
    return PrecisionRecipe{"bf16-fp32grad-accum", 2, 2 + 4, 4 + states, 2};
  }
  return invalid_argument("--precision '{}' is not one of {}", name, precision_names());
}

StatusOr<PrecisionRecipe> with_bytes_per_param(PrecisionRecipe recipe, double bytes_per_param) {
  const double floor = recipe.param_bytes + recipe.grad_bytes;
  if (bytes_per_param < floor) {
    return invalid_argument("--bytes-per-param {} is less than the {} bytes {} needs for params and "
                            "grads alone", bytes_per_param, floor, recipe.name);
  }
  recipe.optimizer_bytes = bytes_per_param - floor;
  recipe.name = "custom";
  return recipe;
}

const std::vector<std::string>& precision_choices() {
  static const std::vector<std::string> names = {
      "fp32-adam",  "fp32", "bf16-mixed",    "bf16",
      "fp16-mixed", "fp16", "bf16-fp32grad", "bf16-fp32grad-accum"};
  return names;
}

std::string_view precision_names() {
  return "fp32-adam (fp32), bf16-mixed (bf16), fp16-mixed (fp16), bf16-fp32grad, "
         "bf16-fp32grad-accum";
}

// ZeRO 2019 sec. 5.1 (Figure 1): the sharded states are divided by N_d.
ModelStateBytes model_state_bytes(double params, const PrecisionRecipe& recipe, int zero_stage,
                                  int dp) {
  const double n = dp;
  ModelStateBytes bytes;
  bytes.params = params * recipe.param_bytes / (zero_stage >= 3 ? n : 1);
  bytes.grads = params * recipe.grad_bytes / (zero_stage >= 2 ? n : 1);
  bytes.optimizer = params * recipe.optimizer_bytes / (zero_stage >= 1 ? n : 1);
  return bytes;
}

std::string_view optimizer_name(Optimizer value) {
  return value == Optimizer::kSgd ? "sgd" : "adamw";
}

std::optional<Optimizer> parse_optimizer(std::string_view text) {
  if (text == "adamw" || text == "adam") return Optimizer::kAdamW;
  if (text == "sgd") return Optimizer::kSgd;
  return std::nullopt;
}

}  // namespace partrain::memory
