// One node's trace file of a two-node run, read alone: analyze and top say which node's file it
// is, which files are missing and how to merge them (a node_file finding first), rather than
// taking the other node's ranks for crashed ones (critical missing_collective findings); merge
// of that file alone copies it with a warning naming the others.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(NodeFileAnalysisTest, OneNodesFileAloneNamesTheOthersAndTheMerge) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "run.db";
  const fs::path node1 = scratch.path() / "run.node1.db";
  const std::string launch = fmt::format(
      "{} -q launch -n 2 --workload gpt --layers 2 --hidden 32 --heads 4 --seq 16 --vocab 64 "
      "--strategy ddp --micro-batch 1 --steps 3 --nnodes 2 --master-addr 127.0.0.1 "
      "--master-port {} --rdzv-timeout 60s --token t0k3n --trace {}",
      PARTRAIN_BINARY, free_tcp_port(), trace.string());
  CommandResult r = run_shell(launch + " --node-rank 1 >/dev/null 2>&1 & " + launch +
                              " --node-rank 0; status=$?; wait; exit $status");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(node1));

  const std::string merge_command = fmt::format("partrain merge {} {} -o {}", trace.string(),
                                                node1.string(),
                                                (scratch.path() / "run.merged.db").string());
  for (const char* command : {"analyze", "top"}) {
    CommandResult analyzed = run_partrain(fmt::format("{} --json {}", command, node1.string()));
    ASSERT_EQ(analyzed.exit_code, 0) << command << ": " << analyzed.err;
    const nlohmann::json findings = nlohmann::json::parse(analyzed.out)["findings"];
    ASSERT_FALSE(findings.empty()) << analyzed.out;
    EXPECT_EQ(findings[0]["kind"], "node_file") << findings.dump(2);
    EXPECT_NE(findings[0]["evidence"].get<std::string>().find(
                  "is node 1's trace file of a run of 2 nodes: it holds ranks 2,3 of 4"),
              std::string::npos)
        << findings[0].dump();
    EXPECT_NE(findings[0]["evidence"].get<std::string>().find(trace.string()), std::string::npos)
        << findings[0].dump();
    EXPECT_NE(findings[0]["advice"].get<std::string>().find(merge_command), std::string::npos)
        << findings[0].dump();
    for (const auto& finding : findings) {
      EXPECT_NE(finding["kind"], "missing_collective") << command << ": " << finding.dump();
    }
  }
  // Node 0's file alone says the same of node 1's.
  CommandResult node0 = run_partrain("analyze " + trace.string());
  ASSERT_EQ(node0.exit_code, 0) << node0.err;
  EXPECT_NE(node0.out.find("node_file: " + trace.string() + " is node 0's trace file"),
            std::string::npos)
      << node0.out;
  EXPECT_EQ(node0.out.find("missing_collective"), std::string::npos) << node0.out;

  // Merging one file warns; merging both reads as one run, with no node_file finding.
  CommandResult alone = run_partrain(fmt::format("merge {} -o {}", node1.string(),
                                                 (scratch.path() / "alone.db").string()));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.err.find("is node 1's file of a run of 2 nodes (2 of its 4 ranks)"),
            std::string::npos)
      << alone.err;
  CommandResult both = run_partrain(fmt::format("merge {} {} -o {}", trace.string(),
                                                node1.string(),
                                                (scratch.path() / "run.merged.db").string()));
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.err.find("warning"), std::string::npos) << both.err;
  CommandResult merged = run_partrain("analyze --json " +
                                      (scratch.path() / "run.merged.db").string());
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  // Parsed into a local: a range-for over a member of a temporary reads a destroyed object.
  const nlohmann::json report = nlohmann::json::parse(merged.out);
  ASSERT_TRUE(report.contains("findings")) << merged.out;
  for (const auto& finding : report.at("findings")) {
    EXPECT_NE(finding.at("kind"), "node_file") << finding.dump();
  }

  // Node 1's file copied alone (or one of the traces a `partrain trace` per rank wrote, each to
  // its own -o): the launcher's names for the others lead nowhere, so the finding does not
  // send the user to merge files that are not there (it named run.db as node 0's file, and the
  // merge it advised failed with "cannot open").
  const fs::path elsewhere = scratch.path() / "elsewhere";
  fs::create_directories(elsewhere);
  fs::copy_file(node1, elsewhere / "run.node1.db");
  CommandResult lone = run_partrain("analyze " + (elsewhere / "run.node1.db").string());
  ASSERT_EQ(lone.exit_code, 0) << lone.err;
  EXPECT_NE(lone.out.find("holds ranks 2,3 of the 4 of run "), std::string::npos) << lone.out;
  EXPECT_NE(lone.out.find("the other ranks' traces are not beside it under the launcher's "
                          "node-file names (" +
                          (elsewhere / "run.db").string() + " absent)"),
            std::string::npos)
      << lone.out;
  EXPECT_EQ(lone.out.find("is node 1's trace file"), std::string::npos) << lone.out;
}

}  // namespace
}  // namespace partrain::testing
