// The interpreter the torch-labelled tests run (PARTRAIN_TORCH_PYTHON): torch with its Gloo
// backend and HolisticTraceAnalysis importable, at the versions the Makefile pinned when it made
// the environment (its stamp file, scripts/install-torch-venv.sh).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/integration/command_runner.h"
#include "tests/support/torch_python.h"

namespace partrain::testing {
namespace {

TEST(TorchVenv, ImportsTorchAndHtaAtThePinnedVersions) {
  PARTRAIN_REQUIRE_TORCH();
  CommandResult versions = run_shell(
      torch_python() +
      " -c 'import importlib.metadata as m, torch, torch.distributed as dist, hta; "
      "print(\"torch==\" + torch.__version__.split(\"+\")[0], \"HolisticTraceAnalysis==\" + "
      "m.version(\"HolisticTraceAnalysis\"), dist.is_gloo_available())'");
  ASSERT_EQ(versions.exit_code, 0) << versions.err;
  ASSERT_TRUE(std::regex_match(versions.out,
                               std::regex(R"(torch==\S+ HolisticTraceAnalysis==\S+ True\n)")))
      << versions.out;
  // The Makefile's environment records its pins; an interpreter of one's own has none.
  const auto stamp =
      std::filesystem::path(torch_python()).parent_path().parent_path() / "partrain-venv.stamp";
  if (std::filesystem::exists(stamp)) {
    EXPECT_EQ(versions.out, read_file(stamp).substr(0, read_file(stamp).find('\n')) + " True\n");
  }
}

}  // namespace
}  // namespace partrain::testing
