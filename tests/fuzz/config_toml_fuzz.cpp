// libFuzzer target: a user's `--config` TOML file, read the way every subcommand reads it: CLI11's
// ConfigTOML under partrain's CommandConfig (top-level keys go to the subcommand being run), then
// CLI11 matching the items to flags and converting their values. The app mirrors the shape of
// cli/app.cpp's (root flags, extras are errors, one subcommand required, fall-through) with flags
// of each kind the real commands have; linking the real command tree would pull in the whole
// runtime. Any input may be refused with a CLI::ParseError; nothing may crash, hang or throw
// anything else. Given a corpus directory that is empty (ctest passes
// <build>/tests/fuzz/config_toml_fuzz.corpus), LLVMFuzzerInitialize seeds it with a few files in
// the shapes docs/cli.md shows: top-level keys, [launch] and [bench.collectives] sections, arrays.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command_config.h"

namespace {

struct Flags {
  bool verbose = false, quiet = false;
  int nproc_per_node = 1, node_rank = 0, steps = 10, tp = 1, warmup = 5;
  std::optional<int> layers, dp, nnodes;
  std::string grace = "10s", collective_timeout = "300s", trace, dtype = "float", min_bytes = "8";
  std::optional<std::string> workload, strategy;
  std::vector<std::string> command, inject, files;
  std::vector<int> pp_split;
  double lr = 1e-3, step_factor = 2;
  uint64_t seed = 1234;
  bool prefix = true, json = false, sp = false;
};

void add_launch(CLI::App& root, Flags& f) {
  CLI::App* cmd = root.add_subcommand("launch", "launch");
  cmd->add_option("-n,--nproc-per-node,--nproc_per_node", f.nproc_per_node)->capture_default_str();
  cmd->add_option("--nnodes", f.nnodes);
  cmd->add_option("--node-rank,--node_rank", f.node_rank);
  cmd->add_option("--grace", f.grace)->capture_default_str();
  cmd->add_option("--collective-timeout", f.collective_timeout)->capture_default_str();
  cmd->add_flag("--prefix,!--no-prefix", f.prefix);
  cmd->add_flag("--json", f.json);
  cmd->add_option("--trace", f.trace);
  cmd->add_option("command", f.command);
  cmd->add_option("--workload", f.workload)->check(CLI::IsMember({"gpt", "mlp"}));
  cmd->add_option("--layers", f.layers);
  cmd->add_option("--steps", f.steps)->capture_default_str();
  cmd->add_option("--lr", f.lr)->capture_default_str();
  cmd->add_option("--seed", f.seed)->capture_default_str();
  cmd->add_option("--inject", f.inject)
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--dp", f.dp);
  cmd->add_option("--tp", f.tp)->capture_default_str();
  cmd->add_flag("--sp", f.sp);
  cmd->add_option("--pp-split", f.pp_split)->delimiter(',');
  cmd->add_option("--strategy", f.strategy)->check(CLI::IsMember({"ddp", "zero1", "fsdp"}));
}

void add_bench(CLI::App& root, Flags& f) {
  CLI::App* bench = root.add_subcommand("bench", "bench");
  bench->require_subcommand(1);
  CLI::App* collectives = bench->add_subcommand("collectives", "collectives");
  collectives->add_option("-b,--minbytes", f.min_bytes)->capture_default_str();
  collectives->add_option("-f,--stepfactor", f.step_factor)->capture_default_str();
  collectives->add_option("-w,--warmup-iters", f.warmup)->capture_default_str();
  collectives->add_option("-d,--datatype", f.dtype)->capture_default_str();
  collectives->add_flag("--json", f.json);
}

void add_analyze(CLI::App& root, Flags& f) {
  CLI::App* analyze = root.add_subcommand("analyze", "analyze");
  analyze->add_option("traces", f.files)->check(CLI::ExistingFile);
  analyze->add_flag("--json", f.json);
}

// The config file of one input, rewritten for each (CLI11 reads --config from a path).
std::string config_path() {
  static const std::string path = "/tmp/partrain-config-fuzz-" + std::to_string(::getpid()) + ".toml";
  return path;
}

// First byte: the subcommand (an index into kCommands below); then the file.
const char* const kSeeds[] = {
    "\x00nproc-per-node = 4\nworkload = \"mlp\"\nsteps = 3\ninject = [\"crash:rank=1\", "
    "\"slow:rank=0,ms=5\"]\nprefix = false\n",
    "\x00verbose = true\n[launch]\ngrace = \"3s\"\ncollective-timeout = '2s'\npp-split = \"3,1\"\n"
    "lr = 1e-2 # comment\n",
    "\x01[bench.collectives]\nminbytes = \"1K\"\nstepfactor = 4.0\ndatatype = \"float\"\n",
    "\x02traces = [\"a.db\", \"b.db\"]\njson = true\n",
    "\x03[launch]\n-- = [\"python\", \"train.py\"]\nnnodes=2\n\"node-rank\" = 1\n",
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // The first argument that is not a flag is libFuzzer's corpus directory: seed it when empty.
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = (*argv)[i];
    if (arg.empty() || arg[0] == '-') continue;
    std::error_code error;
    std::filesystem::create_directories(arg, error);
    if (!std::filesystem::is_directory(arg) || !std::filesystem::is_empty(arg)) break;
    int n = 0;
    for (const char* seed : kSeeds) {
      // A seed's first byte may be NUL: its length is 1 + the text after it.
      const std::string text = std::string(1, seed[0]) + std::string(seed + 1);
      std::ofstream(std::filesystem::path(arg) / ("seed_config_" + std::to_string(n++) + ".toml"),
                    std::ios::binary)
          .write(text.data(), static_cast<std::streamsize>(text.size()));
    }
    break;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the subcommand on the command line; the rest is the file.
  static const std::vector<std::vector<std::string>> kCommands = {
      {"launch"}, {"bench", "collectives"}, {"analyze"}, {"launch", "--workload", "mlp"}, {}};
  const std::vector<std::string>& sub = kCommands[size == 0 ? 0 : data[0] % kCommands.size()];
  if (size > 0) --size, ++data;
  {
    std::ofstream file(config_path(), std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }

  Flags flags;
  CLI::App app{"partrain"};
  app.add_flag("-v,--verbose", flags.verbose);
  app.add_flag("-q,--quiet", flags.quiet);
  app.set_config("--config", "", "TOML file")->check(CLI::ExistingFile);
  app.config_formatter(std::make_shared<partrain::cli::CommandConfig>(&app));
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.require_subcommand(1);
  app.fallthrough();
  add_launch(app, flags);
  add_bench(app, flags);
  add_analyze(app, flags);

  std::vector<std::string> args = {"partrain"};
  args.insert(args.end(), sub.begin(), sub.end());
  args.insert(args.end(), {"--config", config_path()});
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    // A refused file is fine: cli::run turns it into exit 2 with CLI11's message.
  }
  return 0;
}
