#include "memory/category.h"

#include <gtest/gtest.h>

namespace partrain::memory {
namespace {

TEST(Category, NamesRoundTrip) {
  for (Category category : kAllCategories) {
    auto parsed = parse_category(category_name(category));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, category);
  }
  EXPECT_EQ(category_name(Category::kOptimizer), "optimizer");
  EXPECT_FALSE(parse_category("weights").has_value());
}

}  // namespace
}  // namespace partrain::memory
