// Model states: bytes per parameter for params, grads and optimizer under a named precision
// recipe, and how ZeRO stages 1/2/3 shard them over data-parallel ranks (Rajbhandari 2019
// "ZeRO", sec. 3 and 5: (2 + 2 + K) Psi bytes, K = 12 for mixed-precision Adam).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::memory {

enum class Optimizer { kAdamW, kSgd };  // SGD here is plain SGD (no momentum buffer)

struct PrecisionRecipe {
  std::string name;
  double param_bytes = 0;      // the weights the forward pass reads
  double grad_bytes = 0;       // gradients, including an fp32 accumulation buffer when kept
  double optimizer_bytes = 0;  // fp32 master weights (mixed precision) + optimizer states
  double activation_bytes = 2;  // bytes per activation element (16-bit or fp32)
  double total() const { return param_bytes + grad_bytes + optimizer_bytes; }
};

// fp32-adam 16 (4+4+8), bf16-mixed 16 (2+2+12), bf16-fp32grad 18 (2+4+12),
// bf16-fp32grad-accum 20 (2+2+4 accumulation+12); aliases fp32 and bf16 as `launch` names them.
// SGD keeps no state: fp32 8 (4+4), bf16 mixed 8 (2+2+4 master).
StatusOr<PrecisionRecipe> precision_recipe(std::string_view name, Optimizer optimizer);
// --bytes-per-param: keeps the recipe's param and grad bytes, the rest is optimizer state.
StatusOr<PrecisionRecipe> with_bytes_per_param(PrecisionRecipe recipe, double bytes_per_param);
std::string_view precision_names();  // for help and errors
// Every name precision_recipe takes, aliases included (the commands' --precision choices).
const std::vector<std::string>& precision_choices();

struct ModelStateBytes {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

// ZeRO 2019 sec. 5.1: stage 1 (P_os) divides optimizer states by N_d, stage 2 (P_os+g) also
// gradients, stage 3 (P_os+g+p) also parameters.
ModelStateBytes model_state_bytes(double params, const PrecisionRecipe& recipe, int zero_stage,
                                  int dp);

std::string_view optimizer_name(Optimizer value);
std::optional<Optimizer> parse_optimizer(std::string_view text);

}  // namespace partrain::memory
