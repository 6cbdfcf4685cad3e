#include "core/json_fields.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace partrain {
namespace {

TEST(JsonFields, ReadsTypedFieldsAndNamesTheWrongOne) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"n":3,"big":3000000000,"neg":-1,"f":2.5,"b":true,"s":"x","list":[1,2],"o":{"k":0}})");
  JsonFields r(j, "conf.json", StatusCode::kUnreadable);
  int n = 0;
  ASSERT_TRUE(r.integer("n", n).is_ok());
  EXPECT_EQ(n, 3);
  int big = 0;
  Status too_big = r.integer("big", big, JsonFields::kAnyInteger);
  EXPECT_EQ(too_big.code(), StatusCode::kUnreadable);
  EXPECT_EQ(too_big.message(),
            "conf.json: field 'big' must be an integer from -2147483648 to 2147483647 (got 3000000000)");
  int64_t neg = 0;
  EXPECT_EQ(r.integer("neg", neg).message(), "conf.json: field 'neg' must be a positive integer (got -1)");
  EXPECT_TRUE(r.integer("neg", neg, JsonFields::kAnyInteger).is_ok());
  EXPECT_EQ(neg, -1);
  EXPECT_EQ(r.integer("f", neg, JsonFields::kAnyInteger).message(),
            "conf.json: field 'f' must be an integer (got 2.5)");
  double f = 0;
  ASSERT_TRUE(r.positive_number("f", f).is_ok());
  EXPECT_EQ(f, 2.5);
  bool b = false;
  ASSERT_TRUE(r.boolean("b", b).is_ok());
  EXPECT_TRUE(b);
  std::string text;
  EXPECT_EQ(r.string("b", text).message(), "conf.json: field 'b' must be a string (got true)");
  std::vector<int64_t> list;
  ASSERT_TRUE(r.integers("list", list).is_ok());
  EXPECT_EQ(list, (std::vector<int64_t>{1, 2}));
  auto o = r.object("o");
  ASSERT_TRUE(o.is_ok());
  int k = 0;
  EXPECT_EQ(o->integer("k", k).message(), "conf.json: field 'o.k' must be a positive integer (got 0)");
  EXPECT_EQ(r.no_unknown_fields().message(), "conf.json: unknown field 's'");
}

TEST(JsonFields, AbsentFieldsAreErrorsOnlyWhenRequired) {
  const nlohmann::json j = nlohmann::json::object();
  JsonFields r(j, "PARTRAIN_X", StatusCode::kInvalidArgument);
  int n = 7;
  EXPECT_TRUE(r.integer("n", n, 1, false).is_ok());
  EXPECT_EQ(n, 7);
  Status missing = r.integer("n", n);
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_EQ(missing.message(), "PARTRAIN_X: missing field 'n'");
  enum class Color { kRed, kBlue } color = Color::kBlue;
  auto parse = [](std::string_view s) -> std::optional<Color> {
    if (s == "red") return Color::kRed;
    return std::nullopt;
  };
  EXPECT_TRUE(r.choice("color", color, parse, "red").is_ok());
  EXPECT_EQ(color, Color::kBlue);
  EXPECT_EQ(r.choice("color", color, parse, "red", true).message(), "PARTRAIN_X: missing field 'color'");
  EXPECT_TRUE(r.no_unknown_fields().is_ok());
}

}  // namespace
}  // namespace partrain
