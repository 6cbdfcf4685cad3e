// The `partrain` command line: builds the subcommand tree, gives every flag its PARTRAIN_<FLAG>
// environment variable and TOML config key, parses, and maps failures onto exit codes.
#pragma once

namespace partrain::cli {

int run(int argc, char** argv);

}  // namespace partrain::cli
