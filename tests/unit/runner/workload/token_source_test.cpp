#include "runner/workload/token_source.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

namespace partrain::runner {
namespace {

TEST(SyntheticTokens, DeterministicLearnableAndInVocabulary) {
  auto source = make_synthetic_tokens(42, 97);
  std::vector<int32_t> in(16), out(16), in2(16), out2(16);
  source->sample(5, 16, in.data(), out.data());
  source->sample(5, 16, in2.data(), out2.data());
  EXPECT_EQ(in, in2);
  EXPECT_EQ(out, out2);
  // Targets are the next inputs, and each token has one successor (a learnable bigram).
  for (int i = 0; i + 1 < 16; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], in[static_cast<size_t>(i) + 1]);
  std::map<int32_t, int32_t> successor;
  std::set<int32_t> starts;
  for (uint64_t index = 0; index < 50; ++index) {
    source->sample(index, 16, in.data(), out.data());
    starts.insert(in[0]);
    for (int i = 0; i < 16; ++i) {
      ASSERT_GE(in[static_cast<size_t>(i)], 0);
      ASSERT_LT(in[static_cast<size_t>(i)], 97);
      auto [it, fresh] = successor.emplace(in[static_cast<size_t>(i)], out[static_cast<size_t>(i)]);
      EXPECT_EQ(it->second, out[static_cast<size_t>(i)]);
    }
  }
  EXPECT_GT(starts.size(), 20u);  // samples start in different places
  auto other_seed = make_synthetic_tokens(43, 97);
  other_seed->sample(5, 16, in2.data(), out2.data());
  source->sample(5, 16, in.data(), out.data());
  EXPECT_NE(in, in2);
}

std::string write_tokens(const std::string& name, const std::vector<uint16_t>& tokens,
                         bool llmc_header, int32_t version = 1) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream file(path, std::ios::binary);
  if (llmc_header) {
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = version;
    header[2] = static_cast<int32_t>(tokens.size());
    file.write(reinterpret_cast<const char*>(header.data()), 1024);
  }
  file.write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * 2));
  return path;
}

TEST(TokenFile, ReadsLlmcAndNanoGptLayouts) {
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 50);
  for (bool header : {true, false}) {
    auto source = open_token_file(write_tokens("tokens.bin", tokens, header), 50, 8);
    ASSERT_TRUE(source.is_ok()) << source.status().message();
    std::vector<int32_t> in(8), out(8);
    (*source)->sample(2, 8, in.data(), out.data());
    EXPECT_EQ(in[0], 16);
    EXPECT_EQ(out[0], 17);
    EXPECT_EQ(out[7], 24);
  }
}

TEST(TokenFile, BadFilesAreUnreadableWithTheReason) {
  std::vector<uint16_t> tokens(100, 3);
  auto missing = open_token_file("/nonexistent/tokens.bin", 50, 8);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().exit_code(), 3);
  auto short_file = open_token_file(write_tokens("short.bin", {1, 2, 3}, false), 50, 8);
  ASSERT_FALSE(short_file.is_ok());
  EXPECT_NE(short_file.status().message().find("fewer than one sample"), std::string::npos);
  tokens[42] = 77;
  auto big_token = open_token_file(write_tokens("big.bin", tokens, true), 50, 8);
  ASSERT_FALSE(big_token.is_ok());
  EXPECT_NE(big_token.status().message().find("token 77 at position 42"), std::string::npos)
      << big_token.status().message();
  auto version = open_token_file(write_tokens("v9.bin", tokens, true, 9), 100, 8);
  ASSERT_FALSE(version.is_ok());
  EXPECT_NE(version.status().message().find("version 9"), std::string::npos);
}

}  // namespace
}  // namespace partrain::runner
