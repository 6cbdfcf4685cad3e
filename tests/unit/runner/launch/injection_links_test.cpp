// InjectionLinks: an injection path that LD_PRELOAD or PYTHONPATH would split (a space, a colon)
// is named through a link in a private directory whose own path splits nowhere; safe paths stay
// as they are; the directory goes with the object.
#include "runner/launch/injection_links.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/scratch_dir.h"

namespace partrain::launch {
namespace {

namespace fs = std::filesystem;

class InjectionLinksTest : public ::testing::Test {
 protected:
  // An installed prefix at `name` under the scratch directory: lib/ and share/partrain/python.
  InjectionPaths install_at(const std::string& name) {
    const fs::path prefix = scratch_.path() / name;
    fs::create_directories(prefix / "lib");
    fs::create_directories(prefix / "share/partrain/python");
    std::ofstream(prefix / "lib/libpartrain_inject.so") << "elf";
    std::ofstream(prefix / "share/partrain/python/sitecustomize.py") << "# py";
    return {(prefix / "lib/libpartrain_inject.so").string(),
            (prefix / "share/partrain/python").string()};
  }
  testing::ScratchDir scratch_;
  const fs::path temp_ = scratch_.path() / "tmp";
};

TEST(SearchPathSafe, SpacesTabsNewlinesAndColonsSplit) {
  EXPECT_TRUE(is_search_path_safe("/opt/partrain-1.0/lib/libpartrain_inject.so"));
  EXPECT_FALSE(is_search_path_safe("/opt/my tools/lib"));
  EXPECT_FALSE(is_search_path_safe("/sw/a:b/lib"));
  EXPECT_FALSE(is_search_path_safe("/sw/a\tb"));
  EXPECT_FALSE(is_search_path_safe("/sw/a\nb"));
}

TEST_F(InjectionLinksTest, SafePathsStayAsTheyAreWithNoDirectory) {
  fs::create_directories(temp_);
  const InjectionPaths found = install_at("prefix");
  auto links = InjectionLinks::make(found, {temp_});
  ASSERT_TRUE(links.is_ok()) << links.status().message();
  EXPECT_EQ(links->paths().library, found.library);
  EXPECT_EQ(links->paths().python_module, found.python_module);
  EXPECT_TRUE(links->dir().empty());
  EXPECT_TRUE(fs::is_empty(temp_));
}

TEST_F(InjectionLinksTest, APathWithASpaceOrColonIsNamedThroughALink) {
  fs::create_directories(temp_);
  for (const std::string name : {"sp ace", "co:lon"}) {
    const InjectionPaths found = install_at(name);
    fs::path dir;
    {
      auto links = InjectionLinks::make(found, {scratch_.path() / "not here", temp_});
      ASSERT_TRUE(links.is_ok()) << links.status().message();
      dir = links->dir();
      EXPECT_EQ(dir.parent_path(), temp_);
      EXPECT_TRUE(dir.filename().string().starts_with(kInjectionLinkDirPrefix)) << dir;
      struct stat info {};
      ASSERT_EQ(::stat(dir.c_str(), &info), 0);
      EXPECT_EQ(info.st_mode & 0777, 0700u);
      for (const auto& [alias, target] :
           {std::pair{links->paths().library, found.library},
            std::pair{links->paths().python_module, found.python_module}}) {
        ASSERT_TRUE(alias.has_value());
        EXPECT_TRUE(is_search_path_safe(*alias)) << *alias;
        EXPECT_EQ(fs::canonical(*alias), fs::canonical(*target)) << *alias;
      }
      EXPECT_TRUE(fs::exists(fs::path(*links->paths().python_module) / "sitecustomize.py"));
    }
    EXPECT_FALSE(fs::exists(dir)) << "removed with the object";
    EXPECT_TRUE(fs::exists(*found.library)) << "the links go, not what they name";
  }
}

TEST_F(InjectionLinksTest, OnlyTheUnsafePathIsLinked) {
  fs::create_directories(temp_);
  InjectionPaths found = install_at("prefix");
  const InjectionPaths spaced = install_at("sp ace");
  found.python_module = spaced.python_module;
  auto links = InjectionLinks::make(found, {temp_});
  ASSERT_TRUE(links.is_ok()) << links.status().message();
  EXPECT_EQ(links->paths().library, found.library);
  EXPECT_EQ(fs::path(*links->paths().python_module).parent_path(), links->dir());
}

TEST_F(InjectionLinksTest, NoSafeDirectoryIsARefusalThatSaysWhatToDo) {
  const fs::path spaced_temp = scratch_.path() / "my tmp";
  fs::create_directories(spaced_temp);
  auto links = InjectionLinks::make(install_at("sp ace"), {spaced_temp, temp_ / "missing"});
  ASSERT_FALSE(links.is_ok());
  const std::string message = links.status().message();
  EXPECT_NE(message.find("sp ace"), std::string::npos) << message;
  EXPECT_NE(message.find("my tmp (holds a space or ':' itself)"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
  EXPECT_NE(message.find("Install partrain under a path without spaces or colons"),
            std::string::npos)
      << message;
  EXPECT_TRUE(fs::is_empty(spaced_temp));
}

}  // namespace
}  // namespace partrain::launch
