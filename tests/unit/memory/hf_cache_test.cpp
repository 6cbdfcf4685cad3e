// The local Hugging Face hub cache (memory/hf_cache.h): where it is, as the hub library looks
// for it, and which snapshot's config.json a repository id stands for.
#include "memory/hf_cache.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace partrain::memory {
namespace {

namespace fs = std::filesystem;

// The variables the hub library reads, set for one test and restored after it.
class HubEnvironment {
 public:
  HubEnvironment() {
    for (const char* name : kNames) {
      const char* value = ::getenv(name);
      saved_.push_back(value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~HubEnvironment() {
    for (size_t i = 0; i < std::size(kNames); ++i) {
      if (saved_[i]) {
        ::setenv(kNames[i], saved_[i]->c_str(), 1);
      } else {
        ::unsetenv(kNames[i]);
      }
    }
  }

 private:
  static constexpr const char* kNames[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME",
                                           "XDG_CACHE_HOME", "HOME"};
  std::vector<std::optional<std::string>> saved_;
};

void write_config(const fs::path& snapshot) {
  fs::create_directories(snapshot);
  std::ofstream(snapshot / "config.json") << R"({"model_type": "llama"})";
}

// org/model in `cache`, with snapshots "old" and "new", whose config.json is the newer.
fs::path two_snapshots(const fs::path& cache) {
  const fs::path repo = cache / "models--org--model";
  write_config(repo / "snapshots" / "old");
  write_config(repo / "snapshots" / "new");
  fs::last_write_time(repo / "snapshots" / "old" / "config.json",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  return repo;
}

TEST(HfCache, RepositoryIdsAreOrgSlashName) {
  EXPECT_TRUE(is_hf_repo_id("meta-llama/Meta-Llama-3-8B"));
  for (const char* not_one : {"llama-3-8b", "/x", "x/", "a/b/c", ""}) {
    EXPECT_FALSE(is_hf_repo_id(not_one)) << not_one;
  }
}

TEST(HfCache, TheCacheDirectoryIsTheHubLibrarys) {
  HubEnvironment environment;
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/xdg/huggingface/hub"));
  ::setenv("HF_HOME", "/hf", 1);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/hf/hub"));
  ::setenv("HUGGINGFACE_HUB_CACHE", "/old", 1);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/old"));
  ::setenv("HF_HUB_CACHE", "/cache", 1);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/cache"));
}

// Without HOME the hub library's expanduser falls back to the password database's home: so does
// partrain, never a cache relative to the working directory.
TEST(HfCache, WithoutHomeTheCacheIsUnderTheUsersHomeDirectory) {
  HubEnvironment environment;
  ::unsetenv("HOME");
  const passwd* user = ::getpwuid(::getuid());
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(hf_hub_cache_dir(), fs::path(user->pw_dir) / ".cache" / "huggingface" / "hub");
  EXPECT_TRUE(hf_hub_cache_dir().is_absolute());
}

// refs/main's snapshot wins over a newer one; without refs, the newest; none: how to fetch it.
TEST(HfCache, ARepositoryIdStandsForItsMainSnapshotsConfig) {
  HubEnvironment environment;
  testing::ScratchDir scratch;
  ::setenv("HF_HUB_CACHE", scratch.path().c_str(), 1);
  const fs::path repo = two_snapshots(scratch.path());
  EXPECT_EQ(*find_hf_cached_config("org/model"), repo / "snapshots" / "new" / "config.json");
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "old";
  EXPECT_EQ(*find_hf_cached_config("org/model"), repo / "snapshots" / "old" / "config.json");

  const StatusOr<fs::path> missing = find_hf_cached_config("org/other");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find(
                "no config.json in the Hugging Face cache (" +
                (scratch.path() / "models--org--other").string() +
                "): fetch it with `huggingface-cli download org/other config.json`"),
            std::string::npos)
      << missing.status().message();
}

// refs/main as an editor or Windows leaves it ("\r\n", spaces) names the same revision; a
// revision whose snapshot has no config.json is refused naming it, and the snapshot that has
// one, rather than another revision's config read silently in its place.
TEST(HfCache, RefsMainIsTrimmedAndItsRevisionIsNotReplacedSilently) {
  HubEnvironment environment;
  testing::ScratchDir scratch;
  ::setenv("HF_HUB_CACHE", scratch.path().c_str(), 1);
  const fs::path repo = two_snapshots(scratch.path());
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << " old\r\n";
  const StatusOr<fs::path> trimmed = find_hf_cached_config("org/model");
  ASSERT_TRUE(trimmed.is_ok()) << trimmed.status().message();
  EXPECT_EQ(*trimmed, repo / "snapshots" / "old" / "config.json");

  for (const char* revision : {"partial", "absent"}) {
    fs::create_directories(repo / "snapshots" / "partial");
    std::ofstream(repo / "snapshots" / "partial" / "tokenizer.json") << "{}";
    std::ofstream(repo / "refs" / "main") << revision;
    const StatusOr<fs::path> refused = find_hf_cached_config("org/model");
    ASSERT_FALSE(refused.is_ok()) << revision;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(
                  std::string("refs/main names revision ") + revision +
                  ", whose snapshot has no config.json in the Hugging Face cache"),
              std::string::npos)
        << refused.status().message();
    EXPECT_NE(
        refused.status().message().find("or give another revision's with --model-file " +
                                        (repo / "snapshots" / "new" / "config.json").string()),
        std::string::npos)
        << refused.status().message();
  }
}

// A repository without an organisation (gpt2) is cached as models--NAME.
TEST(HfCache, ARepositoryWithoutAnOrganisationIsModelsDashDashName) {
  HubEnvironment environment;
  ::setenv("HF_HUB_CACHE", "/cache", 1);
  EXPECT_EQ(hf_cache_repo_dir("gpt2"), fs::path("/cache/models--gpt2"));
  EXPECT_EQ(hf_cache_repo_dir("openai-community/gpt2"),
            fs::path("/cache/models--openai-community--gpt2"));
}

}  // namespace
}  // namespace partrain::memory
