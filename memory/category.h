// The categories every tracked byte of training memory belongs to (DESIGN.md "Runtime"): the
// split partrain shows everywhere, from `partrain memory` estimates to the memory_events view.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace partrain::memory {

enum class Category : unsigned char {
  kParams,       // model weights (fp32 master copies live in kOptimizer)
  kGrads,        // gradients, including accumulation buffers
  kOptimizer,    // Adam m and v, fp32 master weights under mixed precision
  kActivations,  // saved for backward
  kComm,         // DDP buckets, FSDP gather buffers, p2p staging
  kWorkspace,    // GEMM and kernel scratch
  kOther,
};

inline constexpr std::array<Category, 7> kAllCategories = {
    Category::kParams, Category::kGrads,     Category::kOptimizer, Category::kActivations,
    Category::kComm,   Category::kWorkspace, Category::kOther};

std::string_view category_name(Category category);
std::optional<Category> parse_category(std::string_view name);

}  // namespace partrain::memory
