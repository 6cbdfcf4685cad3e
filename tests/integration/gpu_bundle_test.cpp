// The GPU bundle (issue 7, item 7) built from this build tree into a scratch directory (nothing is
// rebuilt) and extracted: under 60 MiB, every GPU test inside, $ORIGIN-relative RUNPATHs, every
// non-CUDA library resolved inside it or from the base system, its partrain working from the copy
// in a clean environment; and gpu-validate.sh, which without a GPU reports SKIPPED, never passed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = PARTRAIN_SOURCE_DIR;
const fs::path kBuild = fs::path(PARTRAIN_BINARY).parent_path().parent_path();

// The target provides these (the CUDA toolkit's and driver's libraries, the C and C++ runtimes):
// the bundle must neither pack them nor be the place they resolve to.
const std::regex kCudaLibrary(
    "lib(cuda|cudart|cublas|cublasLt|cupti|nccl|nvrtc|nvJitLink|nvidia-[a-z-]+)\\.so.*");
const std::regex kBaseLibrary(
    "(linux-vdso|ld-linux[a-z0-9_-]*|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|"
    "libstdc\\+\\+|libgcc_s)\\.so.*");

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The GPU test executables the build makes: one per tests/gpu/*_test.cpp.
std::vector<std::string> gpu_test_names() {
  std::vector<std::string> names;
#ifdef PARTRAIN_HAVE_CUDA
  for (const auto& entry : fs::directory_iterator(kSource / "tests" / "gpu")) {
    std::string file = entry.path().filename().string();
    if (file.ends_with("_test.cpp")) names.push_back("gpu_" + entry.path().stem().string());
  }
#endif
  return names;
}

// A clean environment: PATH, HOME, and (the CUDA libraries being the target's) LD_LIBRARY_PATH
// naming only the directories the build tree's partrain takes its CUDA libraries from.
std::string clean_env(const fs::path& home) {
  std::string dirs;
  for (const std::string& line : lines_of(run_shell("ldd " + quoted(PARTRAIN_BINARY)).out)) {
    std::smatch match;
    static const std::regex resolved(R"(^\s*(\S+) => (/\S+)/[^/\s]+ )");
    if (std::regex_search(line, match, resolved) && std::regex_match(match[1].str(), kCudaLibrary)) {
      dirs += (dirs.empty() ? "" : ":") + match[2].str();
    }
  }
  return "env -i PATH=/usr/bin:/bin HOME=" + quoted(home) + " LD_LIBRARY_PATH=" + dirs;
}

struct TableRow {
  std::string name, result, line;
};

// gpu-validate.sh's table: the rows after the "check  result  figure  time  reason" heading,
// whose words mark where the name and result columns begin.
std::vector<TableRow> table_rows(const std::string& out) {
  std::vector<TableRow> rows;
  size_t result_column = std::string::npos;
  auto trim = [](std::string s) { return s.erase(s.find_last_not_of(' ') + 1); };
  for (const std::string& line : lines_of(out)) {
    if (line.starts_with("check ")) {
      result_column = line.find(" result ") + 1;
    } else if (result_column != std::string::npos && line.size() > result_column + 7 &&
               line[result_column - 1] == ' ') {
      rows.push_back({trim(line.substr(0, result_column)), trim(line.substr(result_column, 7)), line});
    } else {
      result_column = std::string::npos;
    }
  }
  return rows;
}

// Without a GPU: nothing FAILs, the checks that need no GPU pass, every other row is SKIPPED and
// says why (no GPU visible, or a build without CUDA).
void expect_gpu_rows_skipped(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 4) << "exit 4: no GPU visible\n" << r.out << r.err;
  std::vector<TableRow> rows = table_rows(r.out);
  std::set<std::string> names;
  for (const TableRow& row : rows) {
    names.insert(row.name);
    if (row.name == "partrain starts" || (row.name == "cuda libraries" && row.result == "PASS")) {
      EXPECT_EQ(row.result, "PASS") << row.line;
      continue;
    }
    EXPECT_EQ(row.result, "SKIPPED") << row.line;
#ifdef PARTRAIN_HAVE_CUDA
    EXPECT_NE(row.line.find("no GPU"), std::string::npos) << "the reason names it:\n" << row.line;
#else
    EXPECT_TRUE(row.line.find("no GPU") != std::string::npos ||
                row.line.find("without CUDA") != std::string::npos) << row.line;
#endif
  }
  for (const char* name :
       {"partrain starts", "cuda libraries", "torch gemm ceiling", "partrain gemm", "bench nccl",
        "gpt cuda bf16", "gpt memory", "gpt trace overhead", "gpt kernels", "gpt cuda bf16 mb4",
        "gpt cuda bf16 mb8", "torch nccl trace", "torch trace overhead"}) {
    EXPECT_TRUE(names.count(name)) << name << " missing from the table:\n" << r.out;
  }
  for (const std::string& test : gpu_test_names()) {
    EXPECT_TRUE(names.count(test)) << test << " missing from the table:\n" << r.out;
  }
}

// Whether every RUNPATH entry of an ELF file starts with $ORIGIN (and it has no old-style RPATH).
void expect_origin_runpath(const fs::path& elf) {
  std::string dynamic = run_shell("readelf -d " + quoted(elf)).out;
  EXPECT_EQ(dynamic.find("(RPATH)"), std::string::npos) << elf;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(dynamic, match, std::regex(R"(\(RUNPATH\)\s+Library runpath: \[([^\]]*)\])")))
      << elf << " has no RUNPATH";
  std::istringstream entries(match[1].str());
  for (std::string entry; std::getline(entries, entry, ':');) {
    EXPECT_TRUE(entry.starts_with("$ORIGIN")) << elf << ": RUNPATH entry " << entry;
  }
}

// ldd with an empty environment: each library is in the bundle, or the base system's, or CUDA's.
void expect_libraries_resolved(const fs::path& elf, const fs::path& root) {
  CommandResult ldd = run_shell("env -i PATH=/usr/bin:/bin ldd " + quoted(elf));
  ASSERT_EQ(ldd.exit_code, 0) << elf << ": " << ldd.err;
  static const std::regex line_re(R"(^\s*(\S+) => (.*) \(0x)");
  static const std::regex missing_re(R"(^\s*(\S+) => not found)");
  for (const std::string& line : lines_of(ldd.out)) {
    std::smatch match;
    if (std::regex_search(line, match, missing_re)) {
      EXPECT_TRUE(std::regex_match(match[1].str(), kCudaLibrary)) << elf << ": " << line;
    } else if (std::regex_search(line, match, line_re)) {
      std::string name = match[1].str(), path = match[2].str();
      if (std::regex_match(name, kCudaLibrary) || std::regex_match(name, kBaseLibrary)) continue;
      EXPECT_EQ(fs::weakly_canonical(path).parent_path(), fs::canonical(root / "lib"))
          << elf.filename() << ": " << name << " resolves outside the bundle, to " << path;
    }
  }
}

TEST(GpuBundle, SelfContainedAndValidatesWithoutAGpu) {
  ScratchDir scratch;
  fs::path archive = scratch.path() / "partrain-gpu-bundle.tar.gz";
#ifdef PARTRAIN_HAVE_CUDA
  const std::string cpu_only;
#else
  const std::string cpu_only = " --allow-cpu-only";
#endif
  CommandResult made = run_shell(quoted(kSource / "scripts" / "make-gpu-bundle.sh") + " --build-dir " +
                                 quoted(kBuild) + " --output " + quoted(archive) + cpu_only);
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  ASSERT_TRUE(fs::exists(archive));
  EXPECT_LT(fs::file_size(archive), 60u << 20) << "the bundle must stay under 60 MiB";

  ASSERT_EQ(run_shell("tar -xzf " + quoted(archive) + " -C " + quoted(scratch.path())).exit_code, 0);
  const fs::path root = scratch.path() / "partrain-gpu-bundle";
  for (const char* file : {"gpu-validate.sh", "gpu-trace-levels.sh", "MANIFEST.txt", "bin/partrain",
                           "lib/libpartrain_inject.so", "share/partrain/models",
                           "tests/torch_nccl_program.py", "tests/check_torch_trace.py"}) {
    EXPECT_TRUE(fs::exists(root / file)) << file << " missing from the bundle";
  }
  for (const std::string& test : gpu_test_names()) {
    EXPECT_TRUE(fs::exists(root / "bin" / test)) << test << " missing from the bundle";
  }

  for (const char* dir : {"bin", "lib"}) {
    for (const auto& entry : fs::directory_iterator(root / dir)) {
      std::string name = entry.path().filename().string();
      EXPECT_FALSE(std::regex_match(name, kCudaLibrary) || std::regex_match(name, kBaseLibrary))
          << name << " is the target's to provide, not the bundle's";
      expect_origin_runpath(entry.path());
      expect_libraries_resolved(entry.path(), root);
    }
  }

  // The extracted copy works on its own: libraries by RUNPATH, presets from share/ beside bin/,
  // and `partrain trace` preloads the bundle's own injection library.
  const std::string env = clean_env(scratch.path());
  const std::string partrain = quoted(root / "bin" / "partrain");
  CommandResult version = run_shell(env + " " + partrain + " --version");
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find("partrain "), std::string::npos) << version.out;
  // OpenBLAS, opened with dlopen (so not in ldd's list), is packed and found by the RUNPATH.
  std::smatch opened;
  ASSERT_TRUE(std::regex_search(version.out, opened,
                                std::regex(R"(OpenBLAS .* \(loaded on demand from (\S+)\))")))
      << version.out;
  EXPECT_EQ(fs::canonical(opened[1].str()), fs::canonical(root / "lib" / "libopenblas.so.0"));
  EXPECT_EQ(run_shell(env + " " + partrain + " --help").exit_code, 0);
  CommandResult memory = run_shell(env + " " + partrain + " memory --model llama-2-7b --json");
  EXPECT_EQ(memory.exit_code, 0) << memory.err;
  CommandResult trace = run_shell("cd " + quoted(scratch.path()) + " && " + env + " " + partrain +
                                  " trace -o traced.db -- sh -c 'echo $LD_PRELOAD'");
  EXPECT_EQ(trace.exit_code, 0) << trace.err;
  EXPECT_NE(trace.out.find((root / "lib" / "libpartrain_inject.so").string()), std::string::npos)
      << trace.out << trace.err;

  // The one command, from the extracted copy, with every GPU hidden (CUDA_VISIBLE_DEVICES=""):
  // it must say SKIPPED and why, then exit 4, also on a machine that has a GPU.
  const std::string validate = env + " CUDA_VISIBLE_DEVICES= " + quoted(root / "gpu-validate.sh") +
                               " --out " + quoted(scratch.path() / "validate");
  expect_gpu_rows_skipped(run_shell(validate));

  // A GPU test that fails is a FAIL row and exit 1, whatever else was skipped.
  const fs::path failing = root / "bin" / "gpu_stand_in_failing_test";
  std::ofstream(failing) << "#!/bin/sh\necho '[  FAILED  ] StandIn.Fails (1 ms)'\n"
                            "echo '[  FAILED  ] 1 test, listed below:'\nexit 1\n";
  fs::permissions(failing, fs::perms::owner_all);
  CommandResult with_failure = run_shell(validate);
  EXPECT_EQ(with_failure.exit_code, 1) << with_failure.out;
  bool reported = false;
  for (const TableRow& row : table_rows(with_failure.out)) {
    if (row.name == "gpu_stand_in_failing_test") {
      reported = true;
      EXPECT_EQ(row.result, "FAIL") << row.line;
      EXPECT_NE(row.line.find("StandIn.Fails"), std::string::npos) << row.line;
    }
  }
  EXPECT_TRUE(reported) << with_failure.out;
}

TEST(GpuBundle, ValidatesFromTheBuildTree) {
  ScratchDir scratch;
  expect_gpu_rows_skipped(run_shell("CUDA_VISIBLE_DEVICES= " +
                                    quoted(kSource / "scripts" / "gpu-validate.sh") +
                                    " --build-dir " + quoted(kBuild) + " --out " +
                                    quoted(scratch.path())));
  EXPECT_TRUE(fs::exists(scratch.path() / "summary.txt"));
}

TEST(GpuBundle, ScriptsExplainUsageAndMissingBuilds) {
  ScratchDir scratch;
  const std::string make = quoted(kSource / "scripts" / "make-gpu-bundle.sh");
  const std::string validate = quoted(kSource / "scripts" / "gpu-validate.sh");
  const std::string levels = quoted(kSource / "scripts" / "gpu-trace-levels.sh");
  for (const std::string& script : {make, validate, levels}) {
    CommandResult help = run_shell(script + " --help");
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << help.out;
    CommandResult bad = run_shell(script + " --no-such-flag");
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--no-such-flag"), std::string::npos) << bad.err;
  }
  for (const char* bad_value : {"--rounds 0", "--steps 5", "--deadline x", "--configs ''"}) {
    CommandResult bad = run_shell(levels + " " + bad_value);
    EXPECT_EQ(bad.exit_code, 2) << bad_value << ": " << bad.err;
    EXPECT_NE(bad.err.find(std::string(bad_value).substr(0, 7)), std::string::npos) << bad.err;
  }
  CommandResult no_partrain = run_shell(levels + " --build-dir " + quoted(scratch.path()));
  EXPECT_EQ(no_partrain.exit_code, 3) << no_partrain.err;
  EXPECT_NE(no_partrain.err.find("no partrain at"), std::string::npos) << no_partrain.err;
  CommandResult no_build = run_shell(validate + " --build-dir " + quoted(scratch.path()) +
                                     " --out " + quoted(scratch.path() / "out"));
  EXPECT_EQ(no_build.exit_code, 3) << no_build.err;
  EXPECT_NE(no_build.err.find("make build"), std::string::npos) << no_build.err;
  CommandResult no_bundle = run_shell(make + " --build-dir " + quoted(scratch.path()));
  EXPECT_EQ(no_bundle.exit_code, 1);
  EXPECT_NE(no_bundle.err.find("--target partrain"), std::string::npos) << no_bundle.err;
#ifndef PARTRAIN_HAVE_CUDA
  CommandResult cpu_only = run_shell(make + " --build-dir " + quoted(kBuild) + " --output " +
                                     quoted(scratch.path() / "b.tar.gz"));
  EXPECT_EQ(cpu_only.exit_code, 1);
  EXPECT_NE(cpu_only.err.find("without CUDA parts"), std::string::npos) << cpu_only.err;
#endif
}

}  // namespace
}  // namespace partrain::testing
