// `make install PREFIX=...` (CMake's install rules) into a temporary prefix: the installed
// partrain runs from there, finds its injection library and share/partrain beside itself, and
// the generated completions and man page cover every command and flag; an admin's umask 077
// still makes an install every user can run; a prefix with a space or ':' still traces.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

// The long flags `partrain --help-all` lists, and the commands.
std::set<std::string> listed_flags() {
  CommandResult help = run_partrain("--help-all");
  std::set<std::string> flags;
  static const std::regex kFlag(R"((^|\n) {2,6}(-[a-zA-Z],)?(--[a-z][a-z0-9_-]*))");  // not a description
  for (auto it = std::sregex_iterator(help.out.begin(), help.out.end(), kFlag);
       it != std::sregex_iterator(); ++it) {
    flags.insert((*it)[3].str());
  }
  return flags;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

const std::vector<std::string> kCommands = {"launch", "trace",   "bench", "collectives",
                                            "gemm",   "ingest",  "memory", "export", "merge",
                                            "import", "analyze", "top",    "recommend"};

class Install : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("PARTRAIN_BINARY") != nullptr) GTEST_SKIP() << "a bundle's binary: no build tree";
    char dir[] = "/tmp/partrain-install-XXXXXX";
    prefix_ = mkdtemp(dir);
    const fs::path build = fs::path(PARTRAIN_BINARY).parent_path().parent_path();
    // Under an admin's umask, which must not make the install private to its owner.
    CommandResult installed = run_shell("umask 077 && cmake --install " + build.string() +
                                        " --prefix " + quoted(prefix_));
    ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;
  }
  void TearDown() override {
    if (!prefix_.empty()) fs::remove_all(prefix_);
  }
  CommandResult run_installed(const std::string& args) {
    // From another directory, with nothing pointing back at the build or source tree.
    return run_shell("cd " + quoted(prefix_) + " && env -u PARTRAIN_SHARE_DIR " +
                     quoted(prefix_ / "bin" / "partrain") + " " + args);
  }
  fs::path prefix_;
};

TEST_F(Install, PutsEachPieceWhereUsersAndToolsLook) {
  for (const char* path :
       {"bin/partrain", "lib/libpartrain_inject.so", "share/partrain/schema.sql",
        "share/partrain/models/llama-2-7b.json", "share/partrain/gpus/h100-80g.json",
        "share/partrain/python/sitecustomize.py", "share/man/man1/partrain.1",
        "share/bash-completion/completions/partrain", "share/zsh/site-functions/_partrain",
        "share/doc/partrain/README.md", "share/doc/partrain/docs/architecture.md",
        "share/doc/partrain/examples/pytorch/ddp_train.py"}) {
    EXPECT_TRUE(fs::exists(prefix_ / path)) << path;
  }
}

TEST_F(Install, TheInstalledBinaryFindsItsLibraryAndDataBesideItself) {
  CommandResult version = run_installed("--version");
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find("partrain "), std::string::npos);
  CommandResult traced = run_installed("trace -o run.db -- true");
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.err.find("not installed beside"), std::string::npos) << traced.err;
  EXPECT_TRUE(fs::exists(prefix_ / "run.db"));
  // A preset only the installed share/partrain has: found there, not in the source tree.
  fs::copy_file(prefix_ / "share/partrain/models/llama-2-7b.json",
                prefix_ / "share/partrain/models/installed-probe.json");
  CommandResult memory = run_installed("memory --model installed-probe --dp 8 --zero 1");
  EXPECT_EQ(memory.exit_code, 0) << memory.err;
  // The prefix may move: paths are relative to the binary.
  const fs::path moved = prefix_.string() + "-moved";
  fs::rename(prefix_, moved);
  prefix_ = moved;
  CommandResult after_move = run_installed("trace -o moved.db -- true");
  EXPECT_EQ(after_move.exit_code, 0) << after_move.err;
  EXPECT_EQ(after_move.err.find("not installed beside"), std::string::npos) << after_move.err;
}

TEST_F(Install, EveryUserCanReadAndRunTheInstallDespiteTheInstallersUmask) {
  int checked = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(prefix_)) {
    struct stat info {};
    ASSERT_EQ(::lstat(entry.path().c_str(), &info), 0) << entry.path();
    const std::string path = fs::relative(entry.path(), prefix_).string();
    if (S_ISDIR(info.st_mode)) {
      EXPECT_EQ(info.st_mode & 0755, 0755u) << path << " is " << std::oct << (info.st_mode & 0777);
    } else if (S_ISREG(info.st_mode)) {
      EXPECT_EQ(info.st_mode & 0444, 0444u) << path << " is " << std::oct << (info.st_mode & 0777);
    }
    ++checked;
  }
  EXPECT_GT(checked, 50);
  struct stat binary {};
  ASSERT_EQ(::stat((prefix_ / "bin/partrain").c_str(), &binary), 0);
  EXPECT_EQ(binary.st_mode & 0755, 0755u);
}

// ld.so splits LD_PRELOAD at spaces and colons, Python PYTHONPATH at colons: an install under
// such a prefix loaded neither the injection library nor partrain's Python module into the
// command (an empty trace, exit 0). The probe shows both from inside the traced command.
TEST_F(Install, APrefixWithASpaceOrAColonStillInjectsLibraryAndPythonModule) {
  const fs::path probe = prefix_.string() + "-probe.sh";
  std::ofstream(probe) << "grep -q libpartrain_inject /proc/$$/maps && echo preloaded\n"
                          "python3 -c 'import os, partrain_torch; "
                          "print(os.path.realpath(partrain_torch.__file__))'\n";
  const std::string base = prefix_.string();
  for (const std::string suffix : {" with space", ":colon"}) {
    const fs::path moved = base + suffix;
    fs::rename(prefix_, moved);
    prefix_ = moved;
    fs::remove(prefix_ / "run.db");
    CommandResult traced = run_installed("trace -o run.db -- sh " + quoted(probe));
    EXPECT_EQ(traced.exit_code, 0) << suffix << ": " << traced.err;
    EXPECT_EQ(traced.err.find("cannot be preloaded"), std::string::npos) << traced.err;
    const std::string module =
        fs::canonical(prefix_ / "share/partrain/python/partrain_torch/__init__.py").string();
    EXPECT_EQ(traced.out, "preloaded\n" + module + "\n") << suffix << ": " << traced.err;
  }
  fs::remove(probe);
}

TEST_F(Install, CompletionsOfferEveryCommandAndFlag) {
  const std::string bash = read_file(prefix_ / "share/bash-completion/completions/partrain");
  const std::string zsh = read_file(prefix_ / "share/zsh/site-functions/_partrain");
  const std::set<std::string> flags = listed_flags();
  ASSERT_GT(flags.size(), 100u);
  for (const std::string& name : kCommands) {
    EXPECT_NE(bash.find(" " + name), std::string::npos) << name;
    EXPECT_NE(zsh.find("'" + name + ":"), std::string::npos) << name;
  }
  for (const std::string& flag : flags) {
    EXPECT_NE(bash.find(flag), std::string::npos) << flag;
    EXPECT_NE(zsh.find("'" + flag + ":"), std::string::npos) << flag;
  }
  EXPECT_EQ(bash.find(" worker"), std::string::npos) << "the launcher's own command";
  // Bash completes as it is typed: a command, a flag, a choice.
  const std::string script = (prefix_ / "share/bash-completion/completions/partrain").string();
  CommandResult completed =
      run_shell("bash -c 'source " + script +
                "; complete_words() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _partrain;"
                " echo \"${COMPREPLY[*]}\"; }; complete_words partrain lau;"
                " complete_words partrain launch --nproc-per;"
                " complete_words partrain bench collectives --op all_r;"
                " complete_words partrain memory --model llama-3-40;"
                " complete_words partrain memory --gpu h20;"
                " complete_words partrain recommend --gpu h100;"
                " complete_words partrain launch --trace \"\";"
                " complete_words partrain export run.db -o \"\"'");
  // A preset's name after --model and --gpu; after a flag taking a file, no words, so that
  // `complete -o default` completes a file name (it offered the command's flags).
  EXPECT_EQ(completed.out,
            "launch\n--nproc-per-node\nall_reduce\nllama-3-405b\nh200-141g\nh100-80g\n\n\n")
      << completed.err;
  EXPECT_NE(zsh.find("--trace) _files; return ;;"), std::string::npos);
  EXPECT_NE(zsh.find("'llama-2-7b'"), std::string::npos);
}

TEST_F(Install, TheManPageCoversEveryCommand) {
  const std::string page = read_file(prefix_ / "share/man/man1/partrain.1");
  EXPECT_EQ(page.rfind(".TH PARTRAIN 1", 0), 0u);
  for (const char* command : {"launch", "trace", "bench collectives", "memory", "recommend"}) {
    EXPECT_NE(page.find(".SS \"partrain " + std::string(command) + "\""), std::string::npos)
        << command;
  }
  EXPECT_NE(page.find("\\-\\-nproc\\-per\\-node"), std::string::npos);
  CommandResult checked = run_shell("command -v groff >/dev/null || exit 77; groff -man -ww -z " +
                                    (prefix_ / "share/man/man1/partrain.1").string());
  if (checked.exit_code != 77) EXPECT_EQ(checked.err, "") << "groff's warnings";
}

// A login node without the CUDA libraries runs the CPU commands (--version, memory, analyze): the
// executable needs none of the libraries it opens on demand. Linked, cuBLAS was NEEDED and
// `partrain --version` could not start there (exit 127).
TEST(InstalledExecutable, DoesNotNeedTheLibrariesItOpensOnDemand) {
  CommandResult dynamic = run_shell("readelf -d " + quoted(PARTRAIN_BINARY));
  ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
  ASSERT_NE(dynamic.out.find("(NEEDED)"), std::string::npos) << dynamic.out;
  for (const char* library : {"libcublas", "libcublasLt", "libpmix"}) {
    EXPECT_EQ(dynamic.out.find(std::string("[") + library + ".so"), std::string::npos)
        << library << " is NEEDED:\n"
        << dynamic.out;
  }
}

}  // namespace
}  // namespace partrain::testing
