// What a new user meets first: help that fits the terminal and names things in words, and
// mistakes (a typo, a torchrun form partrain does not take) answered with the fix and exit 2.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "runner/fault/fault_spec.h"
#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

const std::vector<std::string> kCommands = {
    "",       "launch",  "trace",  "bench",   "bench collectives", "bench gemm", "bench ingest",
    "memory", "export",  "merge",  "import",  "analyze",           "top",        "recommend"};

// Lines longer than `width` that could have been broken (more than one word).
std::vector<std::string> breakable_long_lines(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(' ');
    if (line.size() > width && line.find(' ', start) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

TEST(CliHelp, WrapsTo80ColumnsOffATerminalAndToColumnsWhenSet) {
  for (const std::string& command : kCommands) {
    CommandResult help = run_partrain(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.err;
    EXPECT_EQ(breakable_long_lines(help.out, 80), std::vector<std::string>{})
        << "partrain " << command << " --help";
  }
  CommandResult wide = run_partrain("launch --help", "COLUMNS=120");
  EXPECT_EQ(breakable_long_lines(wide.out, 120), std::vector<std::string>{});
  EXPECT_FALSE(breakable_long_lines(wide.out, 100).empty()) << "COLUMNS=120 uses the width";
  CommandResult all = run_partrain("--help-all");
  EXPECT_EQ(breakable_long_lines(all.out, 80), std::vector<std::string>{});
}

// launch --help's --inject sentence listed every fault kind but stop (docs/reliability.md has it,
// and it works).
TEST(CliHelp, LaunchHelpNamesEveryFaultKind) {
  CommandResult help = run_partrain("launch --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::string text;  // the help as one line: wrapping breaks a sentence anywhere
  std::istringstream words(help.out);
  for (std::string word; words >> word;) text += word + " ";
  const size_t start = text.find("--inject KIND:");
  ASSERT_NE(start, std::string::npos) << help.out;
  const std::string sentence = text.substr(start, text.find("docs/reliability.md", start) - start);
  using runner::fault::FaultKind;
  for (FaultKind kind : {FaultKind::kSlow, FaultKind::kCrash, FaultKind::kExit, FaultKind::kHang,
                         FaultKind::kStop, FaultKind::kDesync, FaultKind::kOom}) {
    const std::string name(runner::fault::fault_kind_name(kind));
    const bool listed = sentence.find(" " + name + " (") != std::string::npos ||
                        sentence.find(" " + name + ",") != std::string::npos;
    EXPECT_TRUE(listed) << name << ": " << sentence;
  }
}

TEST(CliHelp, UsageNamesPartrainNotItsPath) {
  for (const std::string& command : kCommands) {
    CommandResult help = run_partrain(command + " --help");
    const std::string usage = "Usage: partrain " + command;
    EXPECT_NE(help.out.find(usage), std::string::npos) << help.out.substr(0, 400);
    EXPECT_EQ(help.out.find(partrain_binary()), std::string::npos) << command;
  }
}

TEST(CliHelp, TypesAndLimitsAreWords) {
  CommandResult all = run_partrain("--help-all");
  for (const char* noise : {"INT:INT", "UINT:UINT", " in [0 - ", " in [1 - ", "TEXT:{", " :FILE"}) {
    EXPECT_EQ(all.out.find(noise), std::string::npos) << noise;
  }
  CommandResult bench = run_partrain("bench collectives --help");
  EXPECT_NE(bench.out.find("--iters INT=20 (1 to 1000000)"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("--check INT=1 (0 or 1)"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("{gloo, nccl}"), std::string::npos) << bench.out;
}

TEST(CliHelp, ModelAndGpuHelpListThePresets) {
  for (const char* command : {"memory", "recommend"}) {
    CommandResult help = run_partrain(std::string(command) + " --help");
    for (const char* preset : {"llama-2-7b", "llama-3-70b", "gpt3-175b", "h100-80g", "a100-40g"}) {
      EXPECT_NE(help.out.find(preset), std::string::npos) << command << ": " << preset;
    }
  }
}

TEST(CliHelp, TheLaunchersWorkerCommandIsNotListed) {
  for (const char* args : {"--help", "--help-all"}) {
    CommandResult help = run_partrain(args);
    EXPECT_EQ(help.out.find("\n  worker"), std::string::npos) << args;
  }
  CommandResult unknown = run_partrain("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("commands: launch"), std::string::npos) << unknown.err;
  EXPECT_EQ(unknown.err.find("worker"), std::string::npos) << unknown.err;
  EXPECT_EQ(unknown.err.find("did you mean"), std::string::npos) << "nothing near: " << unknown.err;
}

TEST(CliHelp, ATypoIsAnsweredWithTheNearestNameAndExit2) {
  struct Case {
    std::string args;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {"lauch", "unknown command 'lauch' (did you mean `launch`?)"},
           {"lauch --help", "unknown command 'lauch' (did you mean `launch`?)"},
           {"analyse run.db", "(did you mean `analyze`?)"},
           {"bench colectives", "unknown command 'colectives' for `partrain bench` (did you mean "
                                "`collectives`?)"},
           {"launch --nproc-per-nod 2 -- true",
            "unknown flag '--nproc-per-nod' for `partrain launch` (did you mean "
            "`--nproc-per-node`?)"},
           {"launch --nproc-per-nod=2 -- true", "(did you mean `--nproc-per-node`?)"},
           {"memory --modle llama-2-7b", "(did you mean `--model`?)"},
       }) {
    CommandResult r = run_partrain(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
  }
}

TEST(CliHelp, ElasticNodeRangesAreRefusedWithWhatToPass) {
  for (const char* args : {"launch -n 2 --nnodes 1:2 -- true", "launch -n 2 --nnodes=1:4 -- true"}) {
    CommandResult r = run_partrain(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("elastic"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not supported"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Could not convert"), std::string::npos) << r.err;
  }
  CommandResult r = run_partrain("launch -n 2 --nnodes 1:4 -- true");
  EXPECT_NE(r.err.find("--nnodes 4"), std::string::npos) << r.err;
  // Set by torchrun's variable (a Kubeflow PyTorchJob's environment): the refusal names it.
  r = run_partrain("launch -n 2 -- true", "PET_NNODES=1:2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not supported"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("from PET_NNODES='1:2' in the environment"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace partrain::testing
