// json_text.h: string literals that any JSON parser accepts whatever bytes they are given,
// exact microsecond decimals, and a stream that separates, counts and reports write failures.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/json_text.h"

namespace partrain::profiler {
namespace {

std::string literal(std::string_view text) {
  fmt::memory_buffer out;
  append_json_string(out, text);
  return fmt::to_string(out);
}

std::string micros(int64_t ns) {
  fmt::memory_buffer out;
  append_json_us(out, ns);
  return fmt::to_string(out);
}

TEST(JsonTextTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(literal("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(literal("\n\r\t"), R"("\n\r\t")");
  EXPECT_EQ(literal(std::string_view("\x00\x1f\x7f", 3)), "\"\\u0000\\u001f\\u007f\"");
  std::string all_ascii;
  for (int c = 0; c < 0x80; ++c) all_ascii.push_back(static_cast<char>(c));
  EXPECT_EQ(nlohmann::json::parse(literal(all_ascii)).get<std::string>(), all_ascii);
}

TEST(JsonTextTest, KeepsUtf8AndReplacesBytesThatAreNot) {
  EXPECT_EQ(literal("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  const std::string kReplacement = "\xEF\xBF\xBD";
  EXPECT_EQ(literal("\xFF"), "\"" + kReplacement + "\"");
  EXPECT_EQ(literal("\xC0\x80"), "\"" + kReplacement + kReplacement + "\"");  // overlong NUL
  EXPECT_EQ(literal("\xED\xA0\x80"), "\"" + kReplacement + kReplacement + kReplacement + "\"");
  EXPECT_EQ(literal("\xF4\x90\x80\x80").substr(0, 4), "\"" + kReplacement);       // past U+10FFFF
  EXPECT_EQ(literal("ab\xE2\x82"), "\"ab" + kReplacement + kReplacement + "\"");  // cut short
  for (int byte = 0x80; byte < 0x100; ++byte) {
    std::string text = "x" + std::string(1, static_cast<char>(byte)) + "y";
    EXPECT_NO_THROW(nlohmann::json::parse(literal(text))) << "byte " << byte;
  }
}

TEST(JsonTextTest, MicrosecondsKeepNanosecondPrecision) {
  EXPECT_EQ(micros(1'234'567), "1234.567");
  EXPECT_EQ(micros(5), "0.005");
  EXPECT_EQ(micros(0), "0.000");
  EXPECT_EQ(micros(-1'500), "-1.500");
  EXPECT_EQ(micros(1'700'000'000'123'456'789), "1700000000123456.789");
  EXPECT_EQ(micros(std::numeric_limits<int64_t>::min()), "-9223372036854775.808");
}

TEST(JsonTextTest, StreamSeparatesAndCountsElements) {
  std::ostringstream out;
  JsonStream stream(out);
  append_json_raw(stream.raw(), "[");
  for (int i = 0; i < 3; ++i) {
    fmt::format_to(std::back_inserter(stream.next_element()), "{}", i);
    ASSERT_TRUE(stream.end_element().is_ok());
  }
  append_json_raw(stream.raw(), "]");
  ASSERT_TRUE(stream.flush().is_ok());
  EXPECT_EQ(out.str(), "[\n0,\n1,\n2]");
  EXPECT_EQ(stream.elements(), 3);
}

TEST(JsonTextTest, StreamReportsAFailedWrite) {
  std::ostringstream out;
  out.setstate(std::ios::failbit);
  JsonStream stream(out);
  stream.next_element();
  EXPECT_EQ(stream.flush().code(), StatusCode::kFailed);
}

}  // namespace
}  // namespace partrain::profiler
