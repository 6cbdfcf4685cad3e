#include "memory/hf_cache.h"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"

namespace partrain::memory {

bool is_hf_repo_id(std::string_view text) {
  const size_t slash = text.find('/');
  return slash != std::string_view::npos && slash > 0 && slash + 1 < text.size() &&
         text.find('/', slash + 1) == std::string_view::npos;
}

namespace {

// $HOME, else the user's home in the password database (as Python's expanduser, which the hub
// library uses): without either, a cache relative to the working directory would be read.
std::filesystem::path home_directory() {
  if (auto home = env::get("HOME"); home && !home->empty()) return *home;
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr && found->pw_dir != nullptr && found->pw_dir[0] == '/') {
    return found->pw_dir;
  }
  return "/";
}

}  // namespace

std::filesystem::path hf_hub_cache_dir() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {  // the second: its old name
    if (auto cache = env::get(name); cache && !cache->empty()) return *cache;
  }
  if (auto home = env::get("HF_HOME"); home && !home->empty()) {
    return std::filesystem::path(*home) / "hub";
  }
  if (auto xdg = env::get("XDG_CACHE_HOME"); xdg && !xdg->empty()) {
    return std::filesystem::path(*xdg) / "huggingface" / "hub";
  }
  return home_directory() / ".cache" / "huggingface" / "hub";
}

std::filesystem::path hf_cache_repo_dir(std::string_view repo_id) {
  std::string folder = "models--" + std::string(repo_id);
  if (const size_t slash = folder.find('/'); slash != std::string::npos) {
    folder.replace(slash, 1, "--");
  }
  return hf_hub_cache_dir() / folder;
}

namespace {

// The revision refs/main names, without the line end or spaces an editor or Windows left.
std::string main_revision(const std::filesystem::path& repo) {
  std::ifstream main(repo / "refs" / "main");
  std::string revision((std::istreambuf_iterator<char>(main)), std::istreambuf_iterator<char>());
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!revision.empty() && space(revision.back())) revision.pop_back();
  size_t first = 0;
  while (first < revision.size() && space(revision[first])) ++first;
  return revision.substr(first);
}

// The most recently written snapshot's config.json, when a snapshot has one.
std::optional<std::filesystem::path> newest_config(const std::filesystem::path& repo) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::optional<fs::path> newest;
  fs::file_time_type newest_time;
  for (const auto& entry : fs::directory_iterator(repo / "snapshots", error)) {
    const fs::path config = entry.path() / "config.json";
    const auto written = fs::last_write_time(config, error);
    if (error) continue;
    if (!newest || written > newest_time) newest = config, newest_time = written;
  }
  return newest;
}

}  // namespace

StatusOr<std::filesystem::path> find_hf_cached_config(std::string_view repo_id) {
  namespace fs = std::filesystem;
  const fs::path repo = hf_cache_repo_dir(repo_id);
  const std::optional<fs::path> newest = newest_config(repo);
  // refs/main names the snapshot transformers uses by default; another revision's config may
  // describe another model, so it is named, not taken.
  if (const std::string revision = main_revision(repo); !revision.empty()) {
    const fs::path config = repo / "snapshots" / revision / "config.json";
    std::error_code error;
    if (fs::exists(config, error)) return config;
    return invalid_argument(
        "--model '{}': refs/main names revision {}, whose snapshot has no config.json in the "
        "Hugging Face cache ({}): fetch it with `huggingface-cli download {} config.json`{}",
        repo_id, revision, repo.string(), repo_id,
        newest ? fmt::format(", or give another revision's with --model-file {}", newest->string())
               : "");
  }
  if (newest) return *newest;
  return invalid_argument(
      "--model '{}' is not a preset and has no config.json in the Hugging Face cache ({}): fetch "
      "it with `huggingface-cli download {} config.json`, or give --model-file",
      repo_id, repo.string(), repo_id);
}

}  // namespace partrain::memory
