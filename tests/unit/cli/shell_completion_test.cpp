// The completion menus' descriptions: a flag's first sentence, cut at a sentence's end or a
// clause, never inside "e.g." or a word.
#include "cli/shell_completion.h"

#include <gtest/gtest.h>

namespace partrain::cli {
namespace {

std::string zsh_for(const std::string& flag, const std::string& description) {
  std::vector<CommandDoc> tree(1);
  tree[0].path = "partrain";
  tree[0].flags.push_back({{flag}, "", {}, {}, description});
  return zsh_completion(tree);
}

// The zsh menu read "--pp-split:Layers per pipeline stage, e.g" and "Run the command as given,
// never with Python (as torchrun --no-pytho...".
TEST(ShellCompletion, ZshDescriptionsEndAtASentenceOrClauseNotInsideOne) {
  EXPECT_NE(zsh_for("--pp-split", "Layers per pipeline stage, e.g. 3,1 (uneven stages)")
                .find("'--pp-split:Layers per pipeline stage, e.g. 3,1 (uneven stages)'"),
            std::string::npos);
  EXPECT_NE(zsh_for("--no-python",
                    "Run the command as given, never with Python (as torchrun --no-python): a "
                    "script without its execute bit then fails to start")
                .find("'--no-python:Run the command as given, never with Python (as torchrun "
                      "--no-python)'"),
            std::string::npos);
  // A sentence still ends at its full stop.
  EXPECT_NE(zsh_for("--steps", "Optimizer steps. The first is a warm-up")
                .find("'--steps:Optimizer steps'"),
            std::string::npos);
  // Too long and no clause: cut between words.
  const std::string zsh = zsh_for("--x",
                                  "One two three four five six seven eight nine ten eleven "
                                  "twelve thirteen fourteen fifteen");
  EXPECT_NE(zsh.find("'--x:One two three four five six seven eight nine ten eleven twelve...'"),
            std::string::npos)
      << zsh;
}

}  // namespace
}  // namespace partrain::cli
