#include "memory/hf_cache.h"

#include <fstream>
#include <string>

#include "core/env.h"

namespace partrain::memory {

bool is_hf_repo_id(std::string_view text) {
  const size_t slash = text.find('/');
  return slash != std::string_view::npos && slash > 0 && slash + 1 < text.size() &&
         text.find('/', slash + 1) == std::string_view::npos;
}

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
  const std::string home = env::get("HOME").value_or("");
  return std::filesystem::path(home) / ".cache" / "huggingface" / "hub";
}

StatusOr<std::filesystem::path> find_hf_cached_config(std::string_view repo_id) {
  namespace fs = std::filesystem;
  std::string folder = "models--" + std::string(repo_id);
  folder.replace(folder.find('/'), 1, "--");
  const fs::path repo = hf_hub_cache_dir() / folder;
  std::error_code error;
  // refs/main names the snapshot transformers uses by default.
  std::string revision;
  if (std::ifstream main(repo / "refs" / "main"); main) std::getline(main, revision);
  if (!revision.empty() && fs::exists(repo / "snapshots" / revision / "config.json", error)) {
    return repo / "snapshots" / revision / "config.json";
  }
  std::optional<fs::path> newest;
  fs::file_time_type newest_time;
  for (const auto& entry : fs::directory_iterator(repo / "snapshots", error)) {
    const fs::path config = entry.path() / "config.json";
    const auto written = fs::last_write_time(config, error);
    if (error) continue;
    if (!newest || written > newest_time) newest = config, newest_time = written;
  }
  if (newest) return *newest;
  return invalid_argument(
      "--model '{}' is not a preset and has no config.json in the Hugging Face cache ({}): fetch "
      "it with `huggingface-cli download {} config.json`, or give --model-file",
      repo_id, repo.string(), repo_id);
}

}  // namespace partrain::memory
