#include "memory/category.h"

namespace partrain::memory {

std::string_view category_name(Category category) {
  switch (category) {
    case Category::kParams: return "params";
    case Category::kGrads: return "grads";
    case Category::kOptimizer: return "optimizer";
    case Category::kActivations: return "activations";
    case Category::kComm: return "comm";
    case Category::kWorkspace: return "workspace";
    case Category::kOther: return "other";
  }
  return "other";
}

std::optional<Category> parse_category(std::string_view name) {
  for (Category category : kAllCategories) {
    if (category_name(category) == name) return category;
  }
  return std::nullopt;
}

}  // namespace partrain::memory
