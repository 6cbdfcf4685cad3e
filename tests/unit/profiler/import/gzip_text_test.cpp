#include "profiler/import/gzip_text.h"

#include <gtest/gtest.h>

#include "tests/support/kineto_fixture.h"
#include "tests/support/scratch_dir.h"

namespace partrain::profiler {
namespace {

using testing::ScratchDir;

std::string read_all(GzipText& text) {
  std::string out;
  for (int c = text.next(); c >= 0; c = text.next()) out += static_cast<char>(c);
  return out;
}

TEST(GzipText, ReadsPlainAndCompressedFilesAlike) {
  ScratchDir dir;
  std::string body(300000, 'x');  // longer than one buffer
  body += "end";
  testing::write_text(dir.path() / "plain.json", body);
  testing::write_gzip(dir.path() / "packed.json.gz", body);
  auto plain = GzipText::open(dir.path() / "plain.json");
  auto packed = GzipText::open(dir.path() / "packed.json.gz");
  ASSERT_TRUE(plain.is_ok() && packed.is_ok());
  EXPECT_EQ(read_all(**plain), body);
  EXPECT_EQ(read_all(**packed), body);
  EXPECT_FALSE((*plain)->compressed());
  EXPECT_TRUE((*packed)->compressed());
  EXPECT_EQ((*packed)->text_bytes(), body.size());
  EXPECT_TRUE((*packed)->error().empty());
}

TEST(GzipText, TruncatedGzipIsAnErrorNotAShorterText) {
  ScratchDir dir;
  std::string body;
  for (int i = 0; i < 20000; ++i) body += fmt::format("{{\"event\": {}}},\n", i);
  testing::write_gzip(dir.path() / "whole.gz", body);
  const auto size = std::filesystem::file_size(dir.path() / "whole.gz");
  std::filesystem::copy_file(dir.path() / "whole.gz", dir.path() / "cut.gz");
  std::filesystem::resize_file(dir.path() / "cut.gz", size / 2);
  auto cut = GzipText::open(dir.path() / "cut.gz");
  ASSERT_TRUE(cut.is_ok());
  const std::string text = read_all(**cut);
  EXPECT_LT(text.size(), body.size());
  EXPECT_NE((*cut)->error().find("truncated"), std::string::npos) << (*cut)->error();
}

TEST(GzipText, DamagedGzipIsAnError) {
  ScratchDir dir;
  std::string body(100000, 'a');
  testing::write_gzip(dir.path() / "x.gz", body);
  std::fstream f(dir.path() / "x.gz", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(20);
  f.write("\xff\xff\xff\xff\xff\xff", 6);
  f.close();
  auto text = GzipText::open(dir.path() / "x.gz");
  ASSERT_TRUE(text.is_ok());
  read_all(**text);
  EXPECT_FALSE((*text)->error().empty());
}

TEST(GzipText, MissingFileAndDirectoryAreUnreadable) {
  ScratchDir dir;
  auto missing = GzipText::open(dir.path() / "nope.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().exit_code(), 3);
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
  auto directory = GzipText::open(dir.path());
  ASSERT_FALSE(directory.is_ok());
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace partrain::profiler
