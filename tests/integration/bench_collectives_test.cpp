// `partrain bench collectives` end to end: real ranks, real Gloo transport, checked results.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <sstream>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

nlohmann::json run_json(const std::string& args) {
  CommandResult r = run_partrain(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(BenchCollectives, EveryOpCheckedOnFourRanks) {
  nlohmann::json doc = run_json("bench collectives -n 4 --op all -b 1K -e 64K -f 8 -w 1 --iters 3");
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["nranks"], 4);
  EXPECT_EQ(doc["wrong"], 0);
  std::set<std::string> ops;
  for (const auto& result : doc["results"]) {
    ops.insert(result["op"].get<std::string>());
    EXPECT_EQ(result["wrong"], 0) << result.dump();
    EXPECT_GT(result["time_us"].get<double>(), 0.0) << result.dump();
    double algbw = result["algbw_gbps"].get<double>();
    EXPECT_NEAR(algbw, result["bytes"].get<double>() / result["time_us"].get<double>() / 1e3,
                1e-6 * algbw + 1e-9);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast", "all_to_all", "send_recv"}));
  // all_reduce busbw = algbw x 2(n-1)/n.
  const auto& first = doc["results"][0];
  EXPECT_NEAR(first["busbw_gbps"].get<double>(), first["algbw_gbps"].get<double>() * 1.5, 1e-9);
}

TEST(BenchCollectives, DtypesAndReductionsOnThreeRanks) {
  for (const char* dtype : {"bfloat16", "half", "int32", "int64"}) {
    for (const char* redop : {"sum", "avg", "max", "min"}) {
      std::string args = std::string("bench collectives -n 3 --op reduce_scatter -b 3K -e 3K -w 0 "
                                     "--iters 1 -d ") + dtype + " -o " + redop;
      nlohmann::json doc = run_json(args);
      ASSERT_FALSE(doc.is_discarded()) << args;
      EXPECT_EQ(doc["wrong"], 0) << args;
      EXPECT_EQ(doc["results"][0]["type"], dtype);
      EXPECT_EQ(doc["results"][0]["redop"], redop);
    }
  }
}

// Ranks given different sizes (here through PARTRAIN_MAXBYTES, as nodes with other environments
// would) are told so, exit 2, where Gloo's enforce had aborted them (SIGABRT) mid-run.
TEST(BenchCollectives, RanksWithDifferentOptionsAreToldSo) {
  CommandResult r = run_shell(
      partrain_binary() + " launch -n 2 --no-trace -- sh -c 'PARTRAIN_MAXBYTES=$((RANK+1))K exec " +
      partrain_binary() + " bench collectives -b 1K -f 2 -w 0 --iters 1'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the ranks were given different benchmark options"), std::string::npos)
      << r.err;
}

TEST(BenchCollectives, TableOnStdoutLikeNcclTests) {
  CommandResult r = run_partrain("bench collectives -n 2 -b 8 -e 1K -f 4 -w 0 --iters 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("out-of-place"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("algbw"), std::string::npos);
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Avg bus bandwidth"), std::string::npos);
  // Sizes 8, 32, 128, 512 bytes: four rows.
  for (const char* size : {" 8 ", " 32 ", " 128 ", " 512 "}) {
    EXPECT_NE(r.out.find(size), std::string::npos) << size;
  }
}

TEST(BenchCollectives, RunsAsRanksOfPartrainLaunch) {
  CommandResult r = run_partrain(std::string("launch -n 2 --no-prefix -- ") + PARTRAIN_BINARY +
                                 " bench collectives -b 4K -e 4K -w 0 --iters 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["nranks"], 2);
  EXPECT_EQ(doc["wrong"], 0);
}

// Two launchers on one machine as two nodes of 2 ranks each: one world of 4 that completes
// checked collectives across the "nodes".
TEST(BenchCollectives, TwoNodesOfTwoRanksFormOneWorld) {
  int port = free_tcp_port();
  std::string launch = std::string(PARTRAIN_BINARY) +
                       " launch --nnodes 2 --master-addr 127.0.0.1 --master-port " +
                       std::to_string(port) + " -n 2 --no-prefix --rdzv-timeout 60s --token t0k3n";
  std::string bench = std::string(" -- ") + PARTRAIN_BINARY +
                      " bench collectives --op all -b 4K -e 4K -w 0 --iters 2 --json";
  std::string dir = ::testing::TempDir();
  CommandResult r = run_shell(launch + " --node-rank 1" + bench + " >" + dir + "/node1.out 2>&1 & " +
                              launch + " --node-rank 0" + bench + "; status=$?; wait; exit $status");
  ASSERT_EQ(r.exit_code, 0) << r.err << read_file(dir + "/node1.out");
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["nranks"], 4);
  EXPECT_EQ(doc["wrong"], 0);
  EXPECT_EQ(doc["results"].size(), 10u);  // 6 ops, 4 of them also in place
}

// NCCL without a GPU for every rank is one usage error before any rank starts, naming the
// alternative (each rank printed the CUDA runtime's error, exit 1). Without a GPU here; with
// one, two ranks are one more than a single GPU takes.
TEST(BenchCollectives, NcclWithoutAGpuPerRankIsOneUsageError) {
  if (std::filesystem::exists("/dev/nvidia1")) GTEST_SKIP() << "two GPUs are present";
  CommandResult r = run_partrain("bench collectives -n 2 --backend nccl -b 8 -e 8 --iters 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--backend nccl"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--backend gloo"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 0"), std::string::npos) << "no rank started:\n" << r.err;
  if (!std::filesystem::exists("/dev/nvidia0")) {
    EXPECT_NE(r.err.find("--backend nccl: no usable GPU: "), std::string::npos) << r.err;
  }
}

// A size under one element would time nothing (it printed rows of size 0, "OK").
TEST(BenchCollectives, ASizeUnderOneElementIsRefused) {
  CommandResult r = run_partrain("bench collectives -n 2 -b 6 -e 64 -d int64");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("-b/--minbytes 6 is less than one int64 (8 bytes): pass at least 8"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

// A root outside -n is refused once, before any rank starts (each rank printed it, then the
// launcher its failure summary).
TEST(BenchCollectives, RootOutsideTheRanksIsOneUsageError) {
  CommandResult r = run_partrain("bench collectives -n 2 --op broadcast -r 5 -b 8 -e 8 --iters 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("-r/--root 5 is not a rank of this world of 2 (-n): pass 0 to 1"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("rank 0"), std::string::npos) << "no rank started:\n" << r.err;
  EXPECT_EQ(r.out, "");
}

// nccl-tests prints each size's row when it is measured: a sweep to large sizes showed nothing
// for minutes, then the whole table at once. Each line is stamped as it reaches the reader.
TEST(BenchCollectives, EachRowIsPrintedWhenItsSizeIsMeasured) {
  CommandResult r = run_shell(
      partrain_binary() + " bench collectives -n 2 -b 1K -e 16M -f 4 -w 1 --iters 5 2>/dev/null |"
      " while IFS= read -r line; do echo \"$(date +%s%N) $line\"; done");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  long long first_row = 0;
  long long footer = 0;
  for (std::string line; std::getline(lines, line);) {
    const long long stamp = std::stoll(line.substr(0, line.find(' ')));
    const std::string text = line.substr(line.find(' ') + 1);
    if (first_row == 0 && text.find("  1024 ") != std::string::npos) first_row = stamp;
    if (text.starts_with("# Avg bus bandwidth")) footer = stamp;
  }
  ASSERT_GT(first_row, 0) << r.out;
  ASSERT_GT(footer, 0) << r.out;
  // Measuring 4M and 16M (twice 6 runs each, out of place and in place) takes far longer than
  // 0.3 s over loopback; printed at the end, every line came within a few milliseconds.
  EXPECT_GT(footer - first_row, 300'000'000) << r.out;
}

}  // namespace
}  // namespace partrain::testing
