// A model in the local Hugging Face hub cache, by its repository id ("meta-llama/Meta-Llama-3-8B"),
// as `huggingface-cli download` and transformers leave it: HF_HUB_CACHE (or its old name
// HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub, holding models--ORG--NAME/snapshots/REVISION/config.json with
// refs/main naming the revision. Nothing is downloaded: partrain reaches no network.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::memory {

// A repository id: ORG/NAME, each part non-empty, no further slash.
bool is_hf_repo_id(std::string_view text);

// Where the hub cache is looked for, in order (the first that the environment names).
std::filesystem::path hf_hub_cache_dir();

// The cache's directory of `repo_id`: models--ORG--NAME, or models--NAME for a repository without
// an organisation (gpt2), whether or not it is there.
std::filesystem::path hf_cache_repo_dir(std::string_view repo_id);

// The cached config.json of `repo_id`: refs/main's snapshot, else (no refs/main) the most
// recently written one. kInvalidArgument (a --model that names nothing) naming the directory
// looked in and how to fetch the file when the cache has none, or when refs/main's revision has
// none (naming the revision, and another snapshot's config.json where one has it).
StatusOr<std::filesystem::path> find_hf_cached_config(std::string_view repo_id);

}  // namespace partrain::memory
