// The command line as a user meets it: --help and --version, exit codes for bad input,
// PARTRAIN_<FLAG> environment variables and TOML --config files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

TEST(Cli, VersionListsEveryBackend) {
  CommandResult r = run_partrain("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* backend : {"partrain ", "CUDA", "Gloo", "OpenBLAS", "SQLite"}) {
    EXPECT_NE(r.out.find(backend), std::string::npos) << backend << " missing in:\n" << r.out;
  }
#ifdef PARTRAIN_HAVE_CUDA
  for (const char* backend : {"cuBLAS", "NCCL", "CUPTI", "sm_"}) {
    EXPECT_NE(r.out.find(backend), std::string::npos) << backend << " missing in:\n" << r.out;
  }
#endif
}

TEST(Cli, EveryCommandHasHelp) {
  for (const char* command : {"--help", "launch --help", "bench --help",
                              "bench collectives --help"}) {
    CommandResult r = run_partrain(command);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << command;
  }
  CommandResult bench = run_partrain("bench collectives --help");
  EXPECT_NE(bench.out.find("busbw"), std::string::npos);
  EXPECT_NE(bench.out.find("PARTRAIN_MINBYTES"), std::string::npos)
      << "each flag's help names its environment variable";
}

TEST(Cli, UsageErrorsExitTwoWithTheReason) {
  CommandResult none = run_partrain("");
  EXPECT_EQ(none.exit_code, 2);
  CommandResult unknown = run_partrain("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("frobnicate"), std::string::npos) << unknown.err;
  CommandResult bad_flag = run_partrain("bench collectives --no-such-flag");
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_NE(bad_flag.err.find("--no-such-flag"), std::string::npos) << bad_flag.err;
  CommandResult bad_size = run_partrain("bench collectives -b 12Q");
  EXPECT_EQ(bad_size.exit_code, 2);
  EXPECT_NE(bad_size.err.find("12Q"), std::string::npos) << bad_size.err;
  CommandResult bad_type = run_partrain("bench collectives -d float128");
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_NE(bad_type.err.find("float128"), std::string::npos) << bad_type.err;
  // The hidden worker command outside a launcher says how it is meant to start.
  CommandResult worker = run_partrain("worker", "env -u PARTRAIN_WORKLOAD_CONFIG");
  EXPECT_EQ(worker.exit_code, 2);
  EXPECT_NE(worker.err.find("partrain launch --workload"), std::string::npos) << worker.err;
  CommandResult bad_workload = run_partrain("worker", "PARTRAIN_WORKLOAD_CONFIG='{\"x\": 1}'");
  EXPECT_EQ(bad_workload.exit_code, 2);
  EXPECT_NE(bad_workload.err.find("PARTRAIN_WORKLOAD_CONFIG"), std::string::npos)
      << bad_workload.err;
  CommandResult bad_config = run_partrain("bench collectives --config /nonexistent.toml");
  EXPECT_EQ(bad_config.exit_code, 3);  // unreadable input, as a missing trace
  EXPECT_NE(bad_config.err.find("nonexistent.toml"), std::string::npos) << bad_config.err;
}

// A numeric flag's value that is no number is said to be none, with its digits when it is a
// whole number in another notation: CLI11 said "Value 8x not in range 1 to 1048576" and "Could
// not convert: --micro-batch = 1e3". A number out of range keeps the range's words.
TEST(Cli, ANumberInAnotherNotationIsNamedWithItsDigits) {
  const std::pair<const char*, const char*> cases[] = {
      {"--dp 8x", "--dp: '8x' is not a number the flag takes (a whole number from 1 to 1048576)"},
      {"--dp 1e3", "(a whole number from 1 to 1048576): write it in digits, --dp 1000"},
      {"--micro-batch 1e3",
       "--micro-batch: '1e3' is not a number the flag takes: write it in digits, --micro-batch "
       "1000"},
      {"--dp 0", "--dp: Value 0 not in range 1 to 1048576"},
  };
  for (const auto& [args, message] : cases) {
    CommandResult r = run_partrain(std::string("memory --model llama-2-7b ") + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// A boolean flag's variable that is no boolean is named as such, by its name (CLI11's words came
// out as "--json: 'maybe' is not a number the flag takes"); yes/no and 1/0 are booleans.
TEST(Cli, ABooleanFlagsVariableThatIsNoBooleanIsNamed) {
  const std::string memory = "memory --model llama-2-7b --dp 8";
  CommandResult bad = run_partrain(memory, "PARTRAIN_JSON=maybe");
  EXPECT_EQ(bad.exit_code, 2);
  // The variable's message left out yes/no, which works (below) and the help names.
  EXPECT_NE(bad.err.find("PARTRAIN_JSON=maybe is not a boolean (1/0, true/false, yes/no) for "
                         "--json; unset it"),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.err.find("number"), std::string::npos) << bad.err;
  CommandResult typed = run_partrain(memory + " --json=maybe");
  EXPECT_EQ(typed.exit_code, 2);
  EXPECT_NE(typed.err.find("--json: 'maybe' is not a boolean"), std::string::npos) << typed.err;
  for (const char* value : {"yes", "1", "true"}) {
    CommandResult json = run_partrain(memory, std::string("PARTRAIN_JSON=") + value);
    EXPECT_EQ(json.exit_code, 0) << value << ": " << json.err;
    EXPECT_EQ(json.out.rfind("{", 0), 0u) << value << ": " << json.out;
  }
}

// Module files set PARTRAIN_PREFIX to the install prefix: it is not launch's --prefix, which made
// every launch exit 2 (docs/decisions.md).
TEST(Cli, PartrainPrefixIsTheInstallPrefixNotLaunchsFlag) {
  CommandResult launched =
      run_partrain("launch -n 1 --no-trace -- sh -c 'echo hello'", "PARTRAIN_PREFIX=/opt/partrain");
  EXPECT_EQ(launched.exit_code, 0) << launched.err;
  EXPECT_NE(launched.out.find("[rank 0] hello"), std::string::npos) << launched.out;
}

// --trace FILE with --no-trace: the one that came from the environment is named.
TEST(Cli, TraceAndNoTraceNameTheVariableOneCameFrom) {
  CommandResult from_trace = run_partrain("launch -n 1 --no-trace -- true", "PARTRAIN_TRACE=1");
  EXPECT_EQ(from_trace.exit_code, 2);
  EXPECT_NE(
      from_trace.err.find("pass either --trace FILE or --no-trace, not both (PARTRAIN_TRACE=1 "
                          "in the environment"),
      std::string::npos)
      << from_trace.err;
  CommandResult from_no_trace =
      run_partrain("launch -n 1 --trace t.db -- true", "PARTRAIN_NO_TRACE=1");
  EXPECT_EQ(from_no_trace.exit_code, 2);
  EXPECT_NE(from_no_trace.err.find("(PARTRAIN_NO_TRACE=1 in the environment"), std::string::npos)
      << from_no_trace.err;
  CommandResult typed = run_partrain("launch -n 1 --trace t.db --no-trace -- true");
  EXPECT_EQ(typed.exit_code, 2);
  EXPECT_EQ(typed.err.find("environment"), std::string::npos) << typed.err;
}

TEST(Cli, FlagsFromEnvironmentAndConfig) {
  const std::string small = "bench collectives -e 64 -f 2 -w 0 --iters 1 --json";
  // -b from PARTRAIN_MINBYTES.
  CommandResult env = run_partrain(small, "PARTRAIN_MINBYTES=32");
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_NE(env.out.find("\"bytes\": 32"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find("\"bytes\": 33554432"), std::string::npos) << env.out;

  std::string config = ::testing::TempDir() + "/bench.toml";
  std::ofstream(config) << "minbytes = \"16\"\ndatatype = \"int32\"\n";
  CommandResult from_file = run_partrain(small + " --config " + config);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_NE(from_file.out.find("\"bytes\": 16"), std::string::npos) << from_file.out;
  EXPECT_NE(from_file.out.find("\"type\": \"int32\""), std::string::npos) << from_file.out;
  // The command line wins over both.
  CommandResult cli = run_partrain(small + " -b 64 --config " + config, "PARTRAIN_MINBYTES=32");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(cli.out.find("\"bytes\": 16,"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("\"bytes\": 64"), std::string::npos) << cli.out;
  // A malformed config value is named.
  std::ofstream(config) << "root = \"many\"\n";
  CommandResult bad = run_partrain(small + " -b 8 --config " + config);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("many"), std::string::npos) << bad.err;
  // A file that is not TOML is said to be one, with its line: a key without a value, a string
  // left open (they read as an empty value and a quoted preset name).
  std::ofstream(config) << "# sizes\nminbytes = \n";
  CommandResult empty = run_partrain(small + " --config " + config);
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--config " + config + " line 2: 'minbytes' has no value"),
            std::string::npos)
      << empty.err;
  std::ofstream(config) << "datatype = \"int32\n";
  CommandResult open_string = run_partrain(small + " --config " + config);
  EXPECT_EQ(open_string.exit_code, 2);
  EXPECT_NE(open_string.err.find("--config " + config +
                                 " line 1: the string of 'datatype' is not closed"),
            std::string::npos)
      << open_string.err;
  // So is a key that is no flag of the command.
  std::ofstream(config) << "mysterious = 3\n";
  CommandResult extra = run_partrain(small + " -b 8 --config " + config);
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_NE(extra.err.find("mysterious"), std::string::npos) << extra.err;
}

// A decimal comma in a --config file was read by CLI11 as a list and the flag took its last
// value, exit 0 (`lr = 0,001` trained with lr 1; `bytes-per-param = 18,5` sized with 5): refused,
// naming the file, the line and the fix. TOML's digit groups are numbers.
TEST(Cli, ConfigListsForOneValueAreRefusedAndTomlNumbersRead) {
  const std::string config = ::testing::TempDir() + "/decimal.toml";
  std::ofstream(config) << "model = \"llama-2-7b\"\nbytes-per-param = 18,5\n";
  CommandResult comma = run_partrain("memory --json --config " + config);
  EXPECT_EQ(comma.exit_code, 2) << comma.out;
  EXPECT_NE(comma.err.find("--config " + config +
                           " line 2: bytes-per-param = 18,5 is a list of 2 values, but "
                           "--bytes-per-param takes one: write a decimal point "
                           "(bytes-per-param = 18.5)"),
            std::string::npos)
      << comma.err;
  std::ofstream(config) << "model = \"llama-2-7b\"\ndp = 8\ndp = 4\n";
  CommandResult twice = run_partrain("memory --json --config " + config);
  EXPECT_EQ(twice.exit_code, 2) << twice.out;
  EXPECT_NE(twice.err.find("line 3: 'dp' is set again (first on line 2)"), std::string::npos)
      << twice.err;
  std::ofstream(config) << "params = 7_500_000_000\n";
  CommandResult grouped = run_partrain("memory --json --config " + config);
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  EXPECT_EQ(testing::parse_json_output(grouped.out)["params"], 7500000000) << grouped.out;
  std::ofstream(config) << "garbage\n";
  CommandResult bare = run_partrain("memory --model llama-2-7b --config " + config);
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("line 1: 'garbage' is not a `key = value` line"), std::string::npos)
      << bare.err;
}

// A flag given twice takes its last value, as argparse does (it was a usage error: "At Most 1
// required but received 2"); a list flag given twice keeps both lists.
// Output that cannot be written is a failure (exit 1, saying why), as coreutils' is, not a silent
// exit 0; a launch whose workers' output cannot be written stops them and says so (it said the
// pipe's reader had exited, and exited 141).
TEST(Cli, StdoutThatCannotBeWrittenIsExit1) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  auto memory =
      testing::run_shell(testing::partrain_binary() + " memory --model llama-2-7b > /dev/full");
  EXPECT_EQ(memory.exit_code, 1);
  EXPECT_NE(memory.err.find("writing stdout failed: No space left on device"), std::string::npos)
      << memory.err;
  // The benchmarks' reports too (bench gemm said "write error": its own flush had the errno).
  auto gemm = testing::run_shell(testing::partrain_binary() +
                                 " bench gemm --device cpu -s 16 --json > /dev/full");
  EXPECT_EQ(gemm.exit_code, 1);
  EXPECT_NE(gemm.err.find("writing stdout failed: No space left on device"), std::string::npos)
      << gemm.err;
  auto launch = testing::run_shell(testing::partrain_binary() +
                                   " launch -n 2 -- sh -c 'echo rank $RANK; sleep 20' > /dev/full");
  EXPECT_EQ(launch.exit_code, 1);
  EXPECT_NE(launch.err.find("writing stdout failed: No space left on device: stopping the workers"),
            std::string::npos)
      << launch.err;
  EXPECT_NE(launch.err.find("every worker has exited"), std::string::npos) << launch.err;
}

// Every command's output to a full disk says why with strerror, once: --version exited 0, and
// output written in one large piece (--help-all, analyze's report) said "write error", its errno
// gone by the final flush.
TEST(Cli, StdoutWriteErrorsSayWhyOnce) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  for (const std::string args : {"--version", "--help-all", "--help"}) {
    SCOPED_TRACE(args);
    auto r = testing::run_shell(testing::partrain_binary() + " " + args + " > /dev/full");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "partrain: error: writing stdout failed: No space left on device\n");
  }
}

// Started with stdout closed (`>&-`), a command's output was lost with exit 0: /dev/null, opened
// on descriptor 1 to keep it from the next file, took it. It fails as on a closed descriptor,
// as `cat >&-` does; a launch (a cron job's) still runs, and a traced command sees it closed as
// it would untraced.
TEST(Cli, StdoutClosedAtTheStartIsAWriteError) {
  for (const std::string args : {"memory --model llama-2-7b --json", "--version",
                                 "recommend --model llama-2-7b --gpus 8 --global-batch 64"}) {
    SCOPED_TRACE(args);
    auto r = testing::run_shell(testing::partrain_binary() + " " + args + " >&-");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "partrain: error: writing stdout failed: Bad file descriptor\n");
  }
  const std::string dir = ::testing::TempDir();
  const std::string seen = dir + "/closed_seen";
  const std::string trace = dir + "/closed_stdout.db";
  std::remove(seen.c_str());
  std::remove(trace.c_str());
  auto traced = testing::run_shell(testing::partrain_binary() + " trace -o " + trace +
                                   " -- sh -c 'if [ -e " + "/proc/$$/fd/1 ]; then echo open > " +
                                   seen + "; else echo closed > " + seen + "; fi' >&-");
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(testing::read_file(seen), "closed\n");
  auto launched = testing::run_shell(testing::partrain_binary() +
                                     " launch -n 2 --no-trace -- sh -c 'echo rank $RANK' >&-");
  EXPECT_EQ(launched.exit_code, 0) << launched.err;
}

// A command reads only its own flags' variables: a launch's left in the environment cannot break
// another command (PARTRAIN_STEPS=1:1 made `partrain memory` fail to convert launch's --steps).
// The help still shows every command's.
TEST(Cli, ACommandReadsOnlyItsOwnFlagsVariables) {
  CommandResult memory =
      run_partrain("memory --model llama-2-7b --json",
                   "PARTRAIN_STEPS=1:1 PARTRAIN_NPROC_PER_NODE=abc PARTRAIN_MINBYTES=x");
  EXPECT_EQ(memory.exit_code, 0) << memory.err;
  // Its own still apply, and a bad one of its own is still an error.
  CommandResult own = run_partrain("memory --model llama-2-7b --json", "PARTRAIN_DP=4");
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_NE(own.out.find("\"dp\": 4"), std::string::npos) << own.out;
  CommandResult bad = run_partrain("memory --model llama-2-7b", "PARTRAIN_LAYERS=abc");
  EXPECT_EQ(bad.exit_code, 2);
  // Saying where the value came from: nobody typed --layers.
  EXPECT_NE(bad.err.find("--layers: 'abc' is not a number (from PARTRAIN_LAYERS='abc' in the "
                         "environment: fix or unset it)"),
            std::string::npos)
      << bad.err;
  CommandResult typed = run_partrain("memory --model llama-2-7b --layers abc", "PARTRAIN_LAYERS=7");
  EXPECT_EQ(typed.exit_code, 2);
  EXPECT_EQ(typed.err.find("(from"), std::string::npos) << typed.err;
  CommandResult help = run_partrain("--help-all");
  EXPECT_NE(help.out.find("Env:PARTRAIN_NPROC_PER_NODE"), std::string::npos);
  EXPECT_NE(help.out.find("Env:PARTRAIN_KV_LEN"), std::string::npos);
  // --help-all expands every level: bench's subcommands' flags too (CLI11 stopped at bench).
  EXPECT_NE(help.out.find("-b,--minbytes"), std::string::npos);
  EXPECT_NE(help.out.find("Env:PARTRAIN_MINBYTES"), std::string::npos);
}

TEST(Cli, AFlagGivenTwiceTakesItsLastValue) {
  CommandResult twice = run_partrain("bench collectives -b 16 -b 32 -e 32 -w 0 --iters 1 --json");
  ASSERT_EQ(twice.exit_code, 0) << twice.err;
  EXPECT_NE(twice.out.find("\"bytes\": 32"), std::string::npos) << twice.out;
  EXPECT_EQ(twice.out.find("\"bytes\": 16"), std::string::npos) << twice.out;
  CommandResult lists = run_partrain("bench gemm --device cpu -s 8 -s 16,24 -c 0 --iters 1");
  ASSERT_EQ(lists.exit_code, 0) << lists.err;
  for (const char* shape : {"8^3", "16^3", "24^3"}) {
    EXPECT_NE(lists.out.find(shape), std::string::npos) << shape << "\n" << lists.out;
  }
}

}  // namespace
}  // namespace partrain::testing
