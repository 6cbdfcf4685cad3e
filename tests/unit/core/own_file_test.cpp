#include "core/own_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/output_path.h"
#include "core/temp_dir.h"
#include "tests/support/scratch_dir.h"

namespace partrain {
namespace {
namespace fs = std::filesystem;

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class OwnFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    victim_ = dir_ / "victim";
    std::ofstream(victim_) << "precious";
  }
  testing::ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
  fs::path victim_;
};

TEST_F(OwnFileTest, MakesAnAbsentFileAndReopensOurOwn) {
  const fs::path path = dir_ / "run.db-writer";
  StatusOr<int> made = open_own_file(path, "the lock");
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  ASSERT_EQ(::write(*made, "x", 1), 1);
  ::close(*made);
  StatusOr<int> again = open_own_file(path, "the lock");
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  ::close(*again);
  EXPECT_EQ(contents(path), "x") << "opened, not truncated";
}

// A link (to a file or to nothing), a second hard link of a file and a FIFO are refused with
// the path named; the victim is untouched.
TEST_F(OwnFileTest, RefusesALinkAHardLinkAndAFifo) {
  fs::create_symlink(victim_, dir_ / "link");
  fs::create_symlink(dir_ / "absent", dir_ / "dangling");
  fs::create_hard_link(victim_, dir_ / "hard");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  for (const char* name : {"link", "dangling", "hard", "fifo"}) {
    StatusOr<int> opened = open_own_file(dir_ / name, "the trace's disk reserve");
    ASSERT_FALSE(opened.is_ok()) << name;
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(opened.status().message().find("the trace's disk reserve " + (dir_ / name).string()),
              std::string::npos)
        << opened.status().message();
  }
  EXPECT_FALSE(fs::exists(dir_ / "absent"));
  EXPECT_EQ(contents(victim_), "precious");
}

// An output named through a link is its target, also one not made yet (a dangling link, a
// relative one, a chain): the link stays, as a shell's `>` keeps it.
TEST_F(OwnFileTest, AnOutputThroughALinkIsItsTargetEvenWhenTheTargetIsNotThereYet) {
  fs::create_directory(dir_ / "out");
  fs::create_symlink(dir_ / "out" / "absent.json", dir_ / "dangling");
  fs::create_symlink("out/relative.json", dir_ / "relative");
  fs::create_symlink("dangling", dir_ / "chain");
  const fs::path out = fs::canonical(dir_ / "out");
  EXPECT_EQ(follow_links(dir_ / "dangling"), out / "absent.json");
  EXPECT_EQ(follow_links(dir_ / "relative"), out / "relative.json");
  EXPECT_EQ(follow_links(dir_ / "chain"), out / "absent.json");
  EXPECT_EQ(follow_links(dir_ / "plain.json"), dir_ / "plain.json");
  EXPECT_EQ(output_kind(follow_links(dir_ / "dangling")), OutputKind::kAbsent);
  fs::create_symlink("loop", dir_ / "loop");
  EXPECT_EQ(follow_links(dir_ / "loop"), dir_ / "loop");
}

TEST_F(OwnFileTest, AUniqueFileNeverTakesANameThatIsThere) {
  for (int i = 0; i < 20; ++i) {
    StatusOr<UniqueFile> file = create_unique_file(dir_, ".out.json.tmp-");
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    ::close(file->fd);
    EXPECT_EQ(file->path.parent_path(), dir_);
    EXPECT_TRUE(file->path.filename().string().starts_with(".out.json.tmp-"));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 21);
}

// TMPDIR that is not there, not a directory, or empty: /tmp, as Python's tempfile falls back.
TEST(TemporaryDirectory, AnUnusableTmpdirFallsBackToTmp) {
  const char* saved = std::getenv("TMPDIR");
  const std::string restore = saved != nullptr ? saved : "";
  testing::ScratchDir scratch;
  for (const std::string tmpdir :
       {std::string("/nonexistent-partrain"), std::string("/dev/null"), std::string()}) {
    ::setenv("TMPDIR", tmpdir.c_str(), 1);
    EXPECT_EQ(temporary_directory(), fs::path("/tmp")) << tmpdir;
  }
  ::setenv("TMPDIR", scratch.path().c_str(), 1);
  EXPECT_EQ(temporary_directory(), scratch.path());
  // A relative one is made absolute, as Python's tempfile does: the paths made from it reach
  // ranks that may change directory before they use them.
  const fs::path cwd = fs::current_path();
  fs::current_path(scratch.path().parent_path());
  ::setenv("TMPDIR", scratch.path().filename().c_str(), 1);
  EXPECT_EQ(temporary_directory(), scratch.path());
  fs::current_path(cwd);
  if (saved != nullptr) {
    ::setenv("TMPDIR", restore.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace partrain
