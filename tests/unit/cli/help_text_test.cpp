#include "cli/help_text.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace partrain::cli {
namespace {

size_t longest_line(const std::string& text) {
  std::istringstream in(text);
  size_t longest = 0;
  for (std::string line; std::getline(in, line);) longest = std::max(longest, line.size());
  return longest;
}

TEST(WrapHelp, AParagraphBreaksAtSpacesWithinTheWidth) {
  const std::string footer =
      "Every flag can also be set through PARTRAIN_<FLAG> (e.g. PARTRAIN_NPROC_PER_NODE=4) or a "
      "--config TOML file; the command line wins, then the config file, then the environment.";
  const std::string wrapped = wrap_help(footer + "\n", 40);
  EXPECT_LE(longest_line(wrapped), 40u) << wrapped;
  EXPECT_EQ(wrapped.substr(0, wrapped.find('\n')), "Every flag can also be set through");
  std::string joined = wrapped;
  for (char& c : joined) c = c == '\n' ? ' ' : c;
  EXPECT_EQ(joined, footer + " ") << "no word lost or split";
}

TEST(WrapHelp, ADescriptionContinuesUnderItsColumn) {
  const std::string line =
      "  launch                      Run N worker processes per node with torchrun's environment, "
      "rendezvous and failure handling\n";
  EXPECT_EQ(wrap_help(line, 62),
            "  launch                      Run N worker processes per node\n"
            "                              with torchrun's environment,\n"
            "                              rendezvous and failure handling\n");
}

TEST(WrapHelp, ShortLinesAndALongWordStayAsTheyAre) {
  EXPECT_EQ(wrap_help("Usage: partrain [OPTIONS]\n\nOptions:\n", 80),
            "Usage: partrain [OPTIONS]\n\nOptions:\n");
  const std::string word(100, 'x');
  EXPECT_EQ(wrap_help(word + " tail", 80), word + "\ntail");
}

TEST(WrapHelp, ANarrowTerminalWrapsUnderTheIndentInstead) {
  const std::string line = "  launch                      Run N worker processes per node\n";
  const std::string wrapped = wrap_help(line, 40);
  EXPECT_LE(longest_line(wrapped), 40u) << wrapped;
  EXPECT_NE(wrapped.find("\n  worker processes per node\n"), std::string::npos) << wrapped;
}

TEST(WrapHelp, AnExampleCommandContinuesWithABackslash) {
  const std::string example =
      "  partrain launch -n 4 -- partrain bench collectives --op reduce_scatter -d bfloat16\n";
  EXPECT_EQ(wrap_help(example, 80),
            "  partrain launch -n 4 -- partrain bench collectives --op reduce_scatter -d \\\n"
            "      bfloat16\n");
}

TEST(TypeInWords, RangesChoicesAndPathsReadAsWords) {
  EXPECT_EQ(type_in_words("INT:INT in [1 - 1048576]"), "INT 1 to 1048576");
  EXPECT_EQ(type_in_words("UINT:UINT in [1 - 1024]"), "UINT 1 to 1024");
  EXPECT_EQ(type_in_words("INT:INT in [0 - 1]"), "INT 0 or 1");
  EXPECT_EQ(type_in_words("TEXT:{gloo,nccl}"), "{gloo, nccl}");
  EXPECT_EQ(type_in_words(":FILE"), "FILE");
  EXPECT_EQ(type_in_words("TEXT:FILE"), "FILE");
  EXPECT_EQ(type_in_words("FLOAT"), "FLOAT");
  EXPECT_EQ(type_in_words("TEXT"), "TEXT");
}

}  // namespace
}  // namespace partrain::cli
