// partrain(1): the man page, generated from the same command tree and help text as `--help`
// (`partrain manpage`, installed by CMake as share/man/man1/partrain.1).
#pragma once

#include <string>
#include <vector>

#include "cli/command_tree.h"

namespace partrain::cli {

// roff (man macros) for `tree`, `version` in its footer line.
std::string man_page(const std::vector<CommandDoc>& tree, const std::string& version);

}  // namespace partrain::cli
