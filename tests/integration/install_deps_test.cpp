// scripts/install-deps.sh, which `make demo` and `make test` run: it names the packages it will
// install with apt-get, and how to skip that, before apt-get runs; PARTRAIN_SKIP_APT=1 skips it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

// An apt-get (and sudo) first on PATH that only says it ran: the test installs nothing.
class InstallDeps : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/partrain-apt-XXXXXX";
    bin_ = mkdtemp(dir);
    for (const char* tool : {"apt-get", "sudo"}) {
      std::ofstream script(bin_ / tool);
      script << "#!/bin/sh\n"
             << (std::string(tool) == "sudo" ? "exec \"$@\"\n" : "echo \"apt-get ran: $*\" >&2\n");
      script.close();
      fs::permissions(bin_ / tool, fs::perms::owner_all);
    }
  }
  void TearDown() override { fs::remove_all(bin_); }
  CommandResult install(const std::string& env, const std::string& args) {
    return run_shell("PATH=" + bin_.string() + ":$PATH " + env + " " +
                     std::string(PARTRAIN_SOURCE_DIR) + "/scripts/install-deps.sh " + args);
  }
  fs::path bin_;
};

TEST_F(InstallDeps, SaysWhatItInstallsAndHowToSkipBeforeAptGetRuns) {
  CommandResult r = install("", "partrain-no-such-package");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t notice = r.err.find("partrain-no-such-package");
  const size_t skip = r.err.find("PARTRAIN_SKIP_APT=1");
  const size_t ran = r.err.find("apt-get ran");
  ASSERT_NE(ran, std::string::npos) << r.err;
  EXPECT_LT(notice, ran) << r.err;
  EXPECT_LT(skip, ran) << r.err;
  EXPECT_NE(r.err.find("apt-get as root"), std::string::npos) << r.err;
}

TEST_F(InstallDeps, PartrainSkipAptInstallsNothingAndNamesWhatIsMissing) {
  CommandResult r = install("PARTRAIN_SKIP_APT=1", "partrain-no-such-package");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("apt-get ran"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("apt-get install partrain-no-such-package"), std::string::npos) << r.err;
  CommandResult optional = install("PARTRAIN_SKIP_APT=1",
                                   "--for 'the cluster tests' --skip PARTRAIN_SKIP_CLUSTER "
                                   "partrain-no-such-package");
  EXPECT_EQ(optional.exit_code, 0) << optional.err;
  EXPECT_EQ(optional.err.find("apt-get ran"), std::string::npos) << optional.err;
  EXPECT_NE(optional.err.find("the cluster tests will skip"), std::string::npos) << optional.err;
}

}  // namespace
}  // namespace partrain::testing
