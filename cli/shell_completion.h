// Shell completion scripts for bash and zsh, generated from the command tree so that every
// command and flag is offered as it is parsed (`partrain completion bash`, installed by CMake).
#pragma once

#include <string>
#include <vector>

#include "cli/command_tree.h"

namespace partrain::cli {

// Gives --model and --gpu, wherever they are, the preset names to offer.
void add_preset_names(std::vector<CommandDoc>& tree, const std::vector<std::string>& models,
                      const std::vector<std::string>& gpus);

// After a flag that takes a value: its choices or presets, else the shell's file completion
// (--trace FILE, -o OUT); else the command's subcommands and flags.
std::string bash_completion(const std::vector<CommandDoc>& tree);
std::string zsh_completion(const std::vector<CommandDoc>& tree);

}  // namespace partrain::cli
