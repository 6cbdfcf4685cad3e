// How a --config TOML file is read (every subcommand): CLI11's TOML reader, with keys at the top
// of the file given to the subcommand being run, so `partrain launch --config run.toml` reads
// `nproc-per-node = 4` without a [launch] header.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <istream>
#include <string>
#include <vector>

namespace partrain::cli {

// Keys under an explicit [launch] or [bench.collectives] section keep that section; a top-level
// key that is a flag of the root (`verbose`) stays the root's.
class CommandConfig final : public CLI::ConfigTOML {
 public:
  explicit CommandConfig(const CLI::App* root) : root_(root) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  std::string checked_toml(const std::string& text, const std::string& file) const;

  const CLI::App* root_;
  mutable size_t files_read_ = 0;  // which of the --config files from_config is reading
};

}  // namespace partrain::cli
