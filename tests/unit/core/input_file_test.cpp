#include "core/input_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/scratch_dir.h"

namespace partrain {
namespace {

TEST(ReadInputFile, ReadsAFileWhole) {
  testing::ScratchDir dir;
  const std::filesystem::path path = dir.path() / "model.json";
  std::ofstream(path) << R"({"name": "m"})" << '\n';
  auto text = read_input_file(path);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "{\"name\": \"m\"}\n");
}

// Up to the bound is read; one byte past it is refused, naming the input and the bound.
TEST(ReadInputFile, MoreThanTheBoundIsUnreadableNamingIt) {
  std::istringstream exact(std::string(100'000, 'x'));
  auto fits = read_input_text(exact, "exact", 100'000);
  ASSERT_TRUE(fits.is_ok()) << fits.status().message();
  EXPECT_EQ(fits->size(), 100'000u);

  std::istringstream over(std::string(100'001, 'x'));
  auto refused = read_input_text(over, "--config big.toml", 100'000);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(refused.status().exit_code(), 3);
  EXPECT_NE(refused.status().message().find("cannot read --config big.toml: it holds more than "
                                            "97.66 KiB"),
            std::string::npos)
      << refused.status().message();
}

// A device that never ends was read until memory ran out (std::bad_alloc after GBs).
TEST(ReadInputFile, ADeviceThatNeverEndsIsRefused) {
  auto refused = read_input_file("/dev/zero", size_t{1} << 20);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(refused.status().message().find("cannot read /dev/zero: it holds more than 1.00 MiB"),
            std::string::npos)
      << refused.status().message();
}

TEST(ReadInputFile, AMissingFileIsNamedWithItsReason) {
  auto missing = read_input_file("/nonexistent/model.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(missing.status().message(),
            "cannot read /nonexistent/model.json: No such file or directory");
}

}  // namespace
}  // namespace partrain
