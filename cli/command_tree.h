// The `partrain` command tree as data, for what is generated from it rather than parsed with it:
// shell completions and the man page (cli/shell_completion.cpp, cli/man_page.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace partrain::cli {

struct FlagDoc {
  std::vector<std::string> names;    // "-n", "--nproc-per-node"
  std::string value;                 // "INT (1 to 4096)", "" for a switch
  std::vector<std::string> choices;  // a choice's names ({gloo,nccl}), else empty
  // The presets a value names (--model, --gpu: share/partrain's models and gpus), offered by the
  // completions; filled by their generator, not by command_tree.
  std::vector<std::string> presets;
  std::string description;
};

struct CommandDoc {
  std::string path;  // "partrain bench collectives"
  std::string description;
  std::string footer;
  std::vector<FlagDoc> flags;  // its own and, as the command line takes them, its parents'
  std::vector<std::string> positionals;
  std::vector<const CommandDoc*> subcommands;
};

// Every command a user may type, root first, each before its subcommands; hidden ones (the
// launcher's worker, these generators) left out. Pointers point into the returned vector's
// storage, which is reserved up front.
std::vector<CommandDoc> command_tree(const CLI::App& root);

}  // namespace partrain::cli
