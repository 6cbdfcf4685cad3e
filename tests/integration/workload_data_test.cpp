// `--data FILE` end to end: a real uint16 token file (llm.c layout) trains, and bad files are
// refused before any rank starts with exit 3 naming the file and the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

std::string write_llmc_tokens(const std::string& name, const std::vector<uint16_t>& tokens) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream file(path, std::ios::binary);
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = static_cast<int32_t>(tokens.size());
  file.write(reinterpret_cast<const char*>(header.data()), 1024);
  file.write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  return path;
}

const char* kModel = "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
                     "--global-batch 4 --micro-batch 2 --lr 3e-3";

TEST(WorkloadData, TrainsOnATokenFile) {
  // A repeating pattern the model can learn: 0 1 2 ... 99 0 1 2 ...
  std::vector<uint16_t> tokens(20000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 100);
  std::string path = write_llmc_tokens("pattern.bin", tokens);
  CommandResult r = run_partrain(std::string("-q launch -n 2 ") + kModel + " --steps 15 --data " +
                                 path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto losses = nlohmann::json::parse(r.out)["losses"];
  EXPECT_LT(losses[14].get<double>(), losses[0].get<double>() - 1.0) << losses.dump();
}

TEST(WorkloadData, BadFilesAreRefusedBeforeAnyRankStarts) {
  std::vector<uint16_t> tokens(1000, 7);
  tokens[500] = 300;  // >= --vocab 128
  struct Case {
    std::string path;
    const char* names;
  };
  for (const Case& c : {Case{"/nonexistent/tokens.bin", "cannot open"},
                        Case{write_llmc_tokens("big.bin", tokens), "token 300 at position 500"},
                        Case{write_llmc_tokens("short.bin", {1, 2, 3}), "fewer than one sample"}}) {
    CommandResult r = run_partrain(std::string("launch -n 2 ") + kModel + " --steps 2 --data " +
                                   c.path);
    EXPECT_EQ(r.exit_code, 3) << c.path << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("rendezvous on"), std::string::npos) << "a rank started";
  }
}

}  // namespace
}  // namespace partrain::testing
