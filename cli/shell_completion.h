// Shell completion scripts for bash and zsh, generated from the command tree so that every
// command and flag is offered as it is parsed (`partrain completion bash`, installed by CMake).
#pragma once

#include <string>
#include <vector>

#include "cli/command_tree.h"

namespace partrain::cli {

std::string bash_completion(const std::vector<CommandDoc>& tree);
std::string zsh_completion(const std::vector<CommandDoc>& tree);

}  // namespace partrain::cli
