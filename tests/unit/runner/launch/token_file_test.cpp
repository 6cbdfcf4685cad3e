// The multi-node secret through a shared file: made by node 0, read by the others, refused when
// others can read it.
#include "runner/launch/token_file.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

namespace partrain::launch {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/token_file_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TokenFileTest, NodeZeroMakesItPrivateAndTheOthersReadTheSame) {
  const std::string path = (dir_ / "token").string();
  auto other = std::async(std::launch::async,
                          [&] { return token_from_file(path, false, 10s, nullptr); });
  std::this_thread::sleep_for(200ms);
  auto made = token_from_file(path, true, 10s, nullptr);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_EQ(made->size(), 32u);
  auto read = other.get();
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  EXPECT_EQ(*read, *made);
  struct stat info{};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  auto again = token_from_file(path, true, 1s, nullptr);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *made) << "an existing file is the job's token: node 0 keeps it";
}

TEST_F(TokenFileTest, AFileOthersCanReadIsRefusedWithTheFix) {
  const std::string path = (dir_ / "token").string();
  std::ofstream(path) << "secret\n";
  ::chmod(path.c_str(), 0644);
  auto token = token_from_file(path, false, 1s, nullptr);
  ASSERT_FALSE(token.is_ok());
  EXPECT_EQ(token.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(token.status().message().find("chmod 600"), std::string::npos)
      << token.status().message();
  ::chmod(path.c_str(), 0600);
  auto fixed = token_from_file(path, false, 1s, nullptr);
  ASSERT_TRUE(fixed.is_ok());
  EXPECT_EQ(*fixed, "secret");
}

TEST_F(TokenFileTest, AFileThatNeverComesTimesOutNamingIt) {
  const std::string path = (dir_ / "never").string();
  auto token = token_from_file(path, false, 300ms, nullptr);
  ASSERT_FALSE(token.is_ok());
  EXPECT_EQ(token.status().code(), StatusCode::kTimeout);
  EXPECT_NE(token.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace partrain::launch
