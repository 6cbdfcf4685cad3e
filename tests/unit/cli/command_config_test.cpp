// A --config TOML file read as every subcommand reads it (cli/command_config.h): what TOML does
// not allow is refused with the file, the line and the fix, where CLI11's lenient reader took a
// list for the last of its values (`lr = 0,001` trained with lr 1).
#include "cli/command_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace partrain::cli {
namespace {

struct Flags {
  double lr = 0;
  int dp = 1;
  std::string model;
  std::vector<std::string> inject;
};

// The shape of cli/app.cpp's app: keys at the top of the file are the subcommand's flags.
class CommandConfigTest : public ::testing::Test {
 protected:
  // Reads `text` as `partrain --config FILE memory`; CLI11's error message, or "" when read.
  std::string read(const std::string& text) {
    std::ofstream(file_) << text;
    CLI::App app{"partrain", "partrain"};
    app.set_config("--config");
    app.config_formatter(std::make_shared<CommandConfig>(&app));
    app.allow_config_extras(CLI::config_extras_mode::error);
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.fallthrough();  // `memory --config FILE`: the root's flag after the subcommand
    CLI::App* memory = app.add_subcommand("memory");
    memory->add_option("--lr", flags_.lr);
    memory->add_option("--dp", flags_.dp);
    memory->add_option("--model", flags_.model);
    memory->add_option("--inject", flags_.inject)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    try {
      app.parse(std::vector<std::string>{file_, "--config", "memory"});  // CLI11: reversed
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }

  // The error read() gives for `message` at `line` of the file.
  std::string at_line(int line, const std::string& message) const {
    return "--config " + file_ + " line " + std::to_string(line) + ": " + message;
  }

  // Per process: ctest runs the cases side by side.
  const std::string file_ =
      ::testing::TempDir() + "/command_config_" + std::to_string(getpid()) + ".toml";
  Flags flags_;
};

TEST_F(CommandConfigTest, ADecimalCommaIsRefusedNotReadAsItsLastPart) {
  EXPECT_EQ(read("model = \"x\"\nlr = 0,001\n"),
            at_line(2,
                    "lr = 0,001 is a list of 2 values, but --lr takes one: write a decimal "
                    "point (lr = 0.001)"));
  EXPECT_EQ(read("lr = 0,05\n"),
            at_line(1,
                    "lr = 0,05 is a list of 2 values, but --lr takes one: write a decimal "
                    "point (lr = 0.05)"));
  EXPECT_NE(read("dp = 8,4\n")
                .find("dp = 8,4 is a list of 2 values, but --dp takes one: write "
                      "one whole number"),
            std::string::npos);
}

TEST_F(CommandConfigTest, AnArrayForAFlagOfOneValueIsRefused) {
  EXPECT_NE(read("lr = [1.5e-3, 3e-3]\n")
                .find("line 1: lr = [1.5e-3, 3e-3] is a list of 2 values, but --lr takes one: "
                      "write one number"),
            std::string::npos);
  EXPECT_NE(read("model = a,b\n")
                .find("--model takes one: write one value, in quotes where the commas are part "
                      "of it (model = \"a,b\")"),
            std::string::npos);
  // Spaces split an unquoted value as commas do.
  EXPECT_NE(read("lr = 1 2\n").find("is a list of 2 values"), std::string::npos);
}

TEST_F(CommandConfigTest, AFlagOfSeveralValuesTakesAnArray) {
  EXPECT_EQ(read("inject = [\"crash:rank=1\", \"slow:rank=0\"]\n"), "");
  EXPECT_EQ(flags_.inject, (std::vector<std::string>{"crash:rank=1", "slow:rank=0"}));
  flags_.inject.clear();
  EXPECT_EQ(read("inject = [\n  \"crash:rank=1\",\n  \"slow:rank=0\",\n]\nlr = 0.5\n"), "");
  EXPECT_EQ(flags_.inject, (std::vector<std::string>{"crash:rank=1", "slow:rank=0"}));
  EXPECT_DOUBLE_EQ(flags_.lr, 0.5);
  // A quoted comma is one value.
  EXPECT_EQ(read("model = \"a,b\"\n"), "");
  EXPECT_EQ(flags_.model, "a,b");
}

TEST_F(CommandConfigTest, AKeySetTwiceIsRefused) {
  EXPECT_EQ(read("dp = 8\nlr = 0.1\ndp = 4\n"),
            at_line(3,
                    "'dp' is set again (first on line 1); TOML takes a key once: drop one of "
                    "the lines"));
  // The top-level key and [memory]'s set one flag; another section's is another key.
  EXPECT_NE(read("dp = 8\n[memory]\ndp = 4\n").find("set again"), std::string::npos);
  EXPECT_EQ(read("[memory]\ndp = 4\n[other]\ndp = 8\n").find("set again"), std::string::npos);
}

TEST_F(CommandConfigTest, TomlNumbersMayGroupTheirDigits) {
  EXPECT_EQ(read("lr = 1_000.000_5\ndp = 1_024\nmodel = \"a_1\"\n"), "");
  EXPECT_DOUBLE_EQ(flags_.lr, 1000.0005);
  EXPECT_EQ(flags_.dp, 1024);
  EXPECT_EQ(flags_.model, "a_1");  // a string keeps its underscores
  EXPECT_EQ(read("model = llama_2_7b\n"), "");
  EXPECT_EQ(flags_.model, "llama_2_7b");
}

// A bare word (CLI11 read it as a flag set to true), a key without a value, an open string.
TEST_F(CommandConfigTest, LinesThatAreNotTomlAreSaidWithTheirLine) {
  const std::string bare =
      "'garbage' is not a `key = value` line (a flag that is on reads "
      "garbage = true)";
  EXPECT_EQ(read("# sizes\ngarbage\n"), at_line(2, bare));
  EXPECT_EQ(read("# sizes\ndp = \n"),
            at_line(2, "'dp' has no value (write dp = VALUE, or drop the line)"));
  EXPECT_EQ(read("model = \"llama\n"),
            at_line(1, "the string of 'model' is not closed (a \" is missing)"));
}

}  // namespace
}  // namespace partrain::cli
