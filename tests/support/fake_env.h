// An environment for code that reads variables through a lookup (runner/launch/cluster_env.h's
// EnvLookup): the tests' variables, nothing of the process's own.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "runner/launch/cluster_env.h"

namespace partrain::testing {

using Env = std::map<std::string, std::string>;

inline launch::EnvLookup fake_env(Env vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace partrain::testing
