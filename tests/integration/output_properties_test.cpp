// Properties of every command's output on one traced run (a small launched gpt, pp 2 x dp 2),
// beside the golden texts of each command's own tests:
//   1. no zero-looking figure: a number made of a zero, a point and zeros ("0.00", "0.000000")
//      is never printed; an exact zero reads "0" and a small non-zero figure shows its digits
//      (3e-06, or a smaller unit: 3.15 KB/s);
//   2. a unit on every number: every figure with a fractional part (or an exponent) is followed
//      by its unit (B, KiB, ..., GB/s, ns, ms, s, %, x, FLOP/s, tok/s, parameters, ...) or sits
//      in a table column whose header names the unit; integers are counts, ranks, steps and
//      indexes and need none; the only unitless decimals are a loss and a parameter norm;
//   3. text agrees with --json: the figures the text prints are the JSON's values at the text's
//      precision (matched by what the row is, never by communicator names, which may change).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/byte_size.h"
#include "core/number_format.h"
#include "tests/integration/command_runner.h"
#include "tests/support/kineto_fixture.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::parse_json_output;
using testing::run_partrain;

// A figure printed in text: the number as printed, what follows it on its line, and the line.
struct Figure {
  std::string number;
  std::string after;
  std::string line;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every number with a fractional part or an exponent that is not part of a word or a version
// ("v1.2", "llama-3-8b", "512^3" are not figures), in order.
std::vector<Figure> decimal_figures(const std::string& text) {
  static const std::regex kNumber(R"(([-+]?\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+))");
  std::vector<Figure> figures;
  for (const std::string& line : lines_of(text)) {
    for (std::sregex_iterator it(line.begin(), line.end(), kNumber), end; it != end; ++it) {
      const size_t at = static_cast<size_t>(it->position(0));
      const char before = at > 0 ? line[at - 1] : ' ';
      if (std::isalnum(static_cast<unsigned char>(before)) || before == '_' || before == '.' ||
          before == '-' || before == '^') {
        continue;
      }
      figures.push_back({it->str(0), line.substr(at + it->length(0)), line});
    }
  }
  return figures;
}

// Property 1: zeros that are not zero, and figures so small in their unit that they read as
// one ("0.000003 GB/s", "0.00089 ms": three zeros after the point, where a smaller unit fits).
// `fixed_unit` lines are a table's fixed-unit columns (nccl-tests' GB/s), where only the first
// applies.
template <typename FixedUnit>
std::vector<std::string> zero_looking(const std::string& text, FixedUnit fixed_unit) {
  static const std::regex kZero(R"([-+]?0\.0+)");
  static const std::regex kTiny(R"([-+]?0\.000\d*)");
  std::vector<std::string> found;
  for (const Figure& f : decimal_figures(text)) {
    if (std::regex_match(f.number, kZero) ||
        (!fixed_unit(f.line) && std::regex_match(f.number, kTiny))) {
      found.push_back(f.number + f.after + "  <- " + f.line);
    }
  }
  return found;
}

std::vector<std::string> zero_looking(const std::string& text) {
  return zero_looking(text, [](const std::string&) { return false; });
}

bool starts_with_unit(std::string after) {
  static const std::set<std::string> kUnits = {
      "B",        "KiB",   "MiB",        "GiB",         "TiB",     "KB",       "MB",      "GB",
      "TB",       "B/s",   "KB/s",       "MB/s",        "GB/s",    "TB/s",     "ns",      "us",
      "ms",       "s",     "%",          "x",           "FLOP/s",  "GFLOP/s",  "TFLOP/s", "FLOPs",
      "tokens/s", "tok/s", "parameters", "bytes/param", "B/param", "B/element"};
  if (after.starts_with("%")) return true;
  if (!after.empty() && (after[0] == 'k' || after[0] == 'M'))
    after = after.substr(1);  // 4.2k tok/s
  if (!after.starts_with(" ")) return false;
  const size_t start = after.find_first_not_of(' ');
  if (start == std::string::npos) return false;
  const size_t end = after.find_first_of(" ,;)(", start);
  std::string word = after.substr(start, end == std::string::npos ? end : end - start);
  return kUnits.count(word) > 0;
}

// Property 2: the decimals without a unit, but for lines `exempt` says have theirs elsewhere
// (a column header) or are unitless by nature.
template <typename Exempt>
std::vector<std::string> without_unit(const std::string& text, Exempt exempt) {
  std::vector<std::string> found;
  for (const Figure& f : decimal_figures(text)) {
    if (!starts_with_unit(f.after) && !exempt(f.line)) found.push_back(f.number + "  <- " + f.line);
  }
  return found;
}

std::vector<std::string> without_unit(const std::string& text) {
  return without_unit(text, [](const std::string&) { return false; });
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += "\n  " + item;
  return out;
}

// The JSON value `value` as text prints it at `printed`'s precision: 7.655 read "7.66".
bool agrees(const std::string& printed, double value) {
  const size_t point = printed.find('.');
  const int decimals =
      point == std::string::npos ? 0 : static_cast<int>(printed.size() - point - 1);
  return std::fabs(std::stod(printed) - value) <= 0.5 * std::pow(10.0, -decimals) + 1e-9;
}

// The first figure after `label` on `line`, as printed.
std::string figure_after(const std::string& line, size_t from) {
  static const std::regex kNumber(R"([-+]?\d+(\.\d+)?)");
  std::smatch match;
  const std::string rest = line.substr(from);
  return std::regex_search(rest, match, kNumber) ? match.str(0) : std::string();
}

class OutputPropertiesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / fmt::format("properties_{}", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    launch_ = new testing::CommandResult(run_partrain(fmt::format(
        "launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
        "--pp 2 --dp 2 --steps 6 --trace {}",
        trace())));
    ASSERT_EQ(launch_->exit_code, 0) << launch_->err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete launch_;
  }
  static std::string trace() { return (*dir_ / "run.db").string(); }

  static testing::CommandResult ok(const std::string& args) {
    auto result = run_partrain(args);
    EXPECT_EQ(result.exit_code, 0) << args << "\n" << result.err;
    return result;
  }

  static inline fs::path* dir_ = nullptr;
  static inline testing::CommandResult* launch_ = nullptr;
};

// The launch summary (the workers' lines on stdout): a loss and a parameter norm are unitless.
TEST_F(OutputPropertiesTest, LaunchSummary) {
  const std::string& text = launch_->out;
  ASSERT_NE(text.find("throughput:"), std::string::npos) << text;
  EXPECT_EQ(zero_looking(text), std::vector<std::string>()) << listed(zero_looking(text));
  auto unitless = without_unit(text, [](const std::string& line) {
    return line.find("loss:") != std::string::npos ||
           line.find("final parameter L2 norm:") != std::string::npos;
  });
  EXPECT_EQ(unitless, std::vector<std::string>()) << listed(unitless);
  // MFU and the GEMMs' share of the peak are shares of a peak: never above 100%.
  std::smatch match;
  ASSERT_TRUE(std::regex_search(text, match, std::regex(R"(MFU ([0-9.e+-]+)%)"))) << text;
  EXPECT_LE(std::stod(match.str(1)), 100.0) << text;
  if (std::regex_search(text, match, std::regex(R"(= ([0-9.]+)% of the peak)"))) {
    EXPECT_LE(std::stod(match.str(1)), 100.0) << text;
  }
}

TEST_F(OutputPropertiesTest, AnalyzeTextAgreesWithJson) {
  const std::string text = ok("analyze " + trace()).out;
  const json doc = parse_json_output(ok("analyze --json " + trace()).out);
  EXPECT_EQ(zero_looking(text), std::vector<std::string>()) << listed(zero_looking(text));
  EXPECT_EQ(without_unit(text), std::vector<std::string>()) << listed(without_unit(text));

  const std::vector<std::string> lines = lines_of(text);
  // Time per rank: each rank's row has its step median and compute per step.
  for (const json& rank : doc["ranks"]) {
    const std::string key = fmt::format("{:>4}  ", rank["rank"].get<int>());
    auto row = std::find_if(lines.begin(), lines.end(),
                            [&](const std::string& l) { return l.starts_with(key); });
    ASSERT_NE(row, lines.end()) << key << "\n" << text;
    EXPECT_TRUE(agrees(figure_after(*row, key.size()), rank["step_ms_median"].get<double>()))
        << *row << " vs " << rank["step_ms_median"];
  }
  // Collectives: every JSON row is a text row with its size, count, total and bandwidths.
  for (const json& c : doc["collectives"]) {
    const bool sized = !c["bytes"].is_null();
    const std::string size = sized ? format_bytes(c["size_bytes"].get<uint64_t>()) : "-";
    const std::string total = sized ? format_bytes(c["bytes"].get<uint64_t>()) : "-";
    const std::string busbw =
        sized ? format_bandwidth(c["busbw_gbps"].get<double>() * 1e9) : std::string("-");
    const std::string count = fmt::format(" {} ", c["count"].get<int>());
    const std::string op = " " + c["op"].get<std::string>() + " ";
    const bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(op) != std::string::npos && l.find(" " + size + " ") != std::string::npos &&
             l.find(count) != std::string::npos && l.find(" " + total + " ") != std::string::npos &&
             l.find(" " + busbw + " ") != std::string::npos;
    });
    EXPECT_TRUE(found) << c.dump() << " (" << size << ", " << total << ", " << busbw << ")\n"
                       << text;
  }
  // Memory: each rank's total peak, as a byte size, on a total row of a block naming the rank.
  for (const json& rank : doc["memory"]) {
    if (rank["peak_total_bytes"].is_null()) continue;  // nothing recorded: no row
    const std::string peak =
        format_bytes(static_cast<uint64_t>(rank["peak_total_bytes"].get<double>()));
    const bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(" total ") != std::string::npos &&
             l.find(" " + peak + " ") != std::string::npos;
    });
    EXPECT_TRUE(found) << "rank " << rank["rank"] << " total " << peak << "\n" << text;
  }
  EXPECT_NE(text.find(fmt::format("median step {} ms",
                                  format_decimal(doc["stragglers"]["step_ms_median"], 3))),
            std::string::npos)
      << text;
}

TEST_F(OutputPropertiesTest, TopOnceAgreesWithJson) {
  const std::string text = ok("top " + trace() + " --once").out;
  const json doc = parse_json_output(ok("top " + trace() + " --json").out);
  EXPECT_EQ(zero_looking(text), std::vector<std::string>()) << listed(zero_looking(text));
  // The loss sparkline's figures are a loss; a rank row's "1.3k" sits in the table's "tok/s"
  // column (a count of tokens with its SI multiplier, as nvitop prints rates in a column).
  const std::string header = text.substr(0, text.find("\n", text.find("rank ")));
  ASSERT_NE(header.find("tok/s"), std::string::npos) << text;
  std::vector<std::string> unitless;
  for (const std::string& item : without_unit(text, [](const std::string& line) {
         return line.rfind("loss ", 0) == 0;
       })) {
    static const std::regex kRankRate(R"(^([0-9.]+)  <- +\d+ +\d+ +[0-9.]+ ms +([0-9.]+)[kMG]? )");
    std::smatch rate;
    const bool in_rate_column = std::regex_search(item, rate, kRankRate) && rate[1] == rate[2];
    if (!in_rate_column) unitless.push_back(item);
  }
  EXPECT_EQ(unitless, std::vector<std::string>()) << listed(unitless);
  const std::vector<std::string> lines = lines_of(text);
  for (const json& rank : doc["ranks"]) {
    // "   0      5    6.0 ms ...": rank, step, step time.
    const std::regex row(fmt::format(R"(^ *{} +{} +([0-9.]+) ms)", rank["rank"].get<int>(),
                                     rank["step"].get<int>()));
    std::smatch match;
    const bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return std::regex_search(l, match, row) &&
             agrees(match.str(1), rank["step_ms"].get<double>());
    });
    EXPECT_TRUE(found) << rank.dump() << "\n" << text;
  }
}

TEST_F(OutputPropertiesTest, MemoryAndItsExplanation) {
  const std::string args = "memory --model llama-3-8b --pp 4 --tp 2 --gpu h100-80g";
  const std::string text = ok(args + " --explain").out;
  const json doc = parse_json_output(ok(args + " --json").out);
  EXPECT_EQ(zero_looking(text), std::vector<std::string>()) << listed(zero_looking(text));
  // The table's units are its header's ("category GiB GB"); the explanation's formulas hold
  // dimensionless factors, so the rule applies to the rest.
  ASSERT_NE(text.find("  category            GiB         GB"), std::string::npos) << text;
  const std::string table = text.substr(0, text.find("\nhow (heaviest stage)"));
  auto unitless = without_unit(table, [](const std::string& line) {
    return std::regex_search(line, std::regex(R"(^  [a-z ]+\*? +[0-9.]+ +[0-9.]+$)"));
  });
  EXPECT_EQ(unitless, std::vector<std::string>()) << listed(unitless);
  for (const json& warning : doc["warnings"]) {
    EXPECT_NE(text.find("warning   " + warning.get<std::string>()), std::string::npos) << text;
  }
  EXPECT_EQ(doc["warnings"].size(), 1u);  // one micro-batch on 4 stages
}

TEST_F(OutputPropertiesTest, BenchCollectivesAgreesWithJson) {
  const std::string args = "bench collectives -n 2 -b 8 -e 64K -f 16 -w 1 --iters 2";
  const std::string text = ok(args).out;
  const json doc = parse_json_output(ok(args + " --json").out);
  // Rows are under nccl-tests' header of units, "(B) (elements) ... (us) (GB/s)".
  ASSERT_NE(text.find("(us)  (GB/s)  (GB/s)"), std::string::npos) << text;
  auto row = [](const std::string& line) { return !line.starts_with("#"); };
  EXPECT_EQ(zero_looking(text, row), std::vector<std::string>()) << listed(zero_looking(text, row));
  auto unitless = without_unit(text, row);
  EXPECT_EQ(unitless, std::vector<std::string>()) << listed(unitless);
  // The runs differ in time; their sizes, counts and checks are the same facts.
  const std::vector<std::string> lines = lines_of(text);
  ASSERT_FALSE(doc["results"].empty());
  for (const json& r : doc["results"]) {
    const std::regex row(fmt::format(R"(^ +{} +{} +{} )", r["bytes"].get<uint64_t>(),
                                     r["count"].get<uint64_t>(), r["type"].get<std::string>()));
    const bool found = std::any_of(lines.begin(), lines.end(),
                                   [&](const std::string& l) { return std::regex_search(l, row); });
    EXPECT_TRUE(found) << r.dump() << "\n" << text;
  }
  EXPECT_NE(text.find(fmt::format("# Out of bounds values : {} OK", doc["wrong"].get<int>())),
            std::string::npos)
      << text;
}

// import's summary names the clock offset of each other host (four ranks on two hosts, their
// all-reduces ending together): "+/- 0.000 ms" was a zero that was not one, and a line per rank
// (1,024 of them) buried the summary: the ranks of a host share one.
TEST_F(OutputPropertiesTest, ImportSummary) {
  const fs::path traces = *dir_ / "kineto";
  fs::create_directories(traces);
  for (int rank = 0; rank < 4; ++rank) {
    const int node = rank / 2;
    testing::KinetoFixture fixture(rank, 4);
    fixture.host(node == 0 ? "node-a" : "node-b").base_time_ns(1'000'000'000);
    for (int step = 0; step < 3; ++step) {
      const double start = 1000.0 * step + (node == 0 ? 0 : 40);
      fixture.step(step, start, 900);
      // Node b's second all-reduce ends 1 ns off the others: the fit's uncertainty is 1 ns.
      const double jitter_us = node == 1 && step == 1 ? 0.001 : 0.0;
      fixture.gloo_all_reduce(1024, start + 100, start + 200,
                              1000.0 * step + 700.0004 * (node + 1) + jitter_us, 7);
    }
    testing::write_text(traces / fmt::format("rank{}.json", rank), fixture.json());
  }
  const auto result = ok("import " + traces.string() + " -o " + (*dir_ / "imported.db").string());
  ASSERT_NE(result.err.find("imported 4 Kineto traces (ranks 0-3 of"), std::string::npos)
      << result.err;
  ASSERT_NE(result.err.find("ranks 2,3 (node-b): clock "), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("rank 2 (node-b)"), std::string::npos) << result.err;
  // The fit's uncertainty in the unit that fits it ("+/- 1 ns"), not "+/- 1e-06 ms".
  EXPECT_TRUE(std::regex_search(result.err, std::regex(R"(\+/- [0-9.]+ (ns|us|ms) \()")))
      << result.err;
  EXPECT_EQ(result.err.find("e-0"), std::string::npos) << result.err;
  const std::string said = result.out + result.err;
  EXPECT_EQ(zero_looking(said), std::vector<std::string>()) << listed(zero_looking(said));
  EXPECT_EQ(without_unit(said), std::vector<std::string>()) << listed(without_unit(said));
}

TEST_F(OutputPropertiesTest, ExportAndMergeSummaries) {
  const std::string exported = (*dir_ / "run.json").string();
  const auto result = ok("export " + trace() + " -o " + exported);
  const std::string said = result.out + result.err;
  EXPECT_EQ(zero_looking(said), std::vector<std::string>()) << listed(zero_looking(said));
  EXPECT_EQ(without_unit(said), std::vector<std::string>()) << listed(without_unit(said));
  const std::string merged = (*dir_ / "merged.db").string();
  const auto merge = run_partrain("merge " + trace() + " -o " + merged);
  const std::string merge_said = merge.out + merge.err;
  EXPECT_EQ(zero_looking(merge_said), std::vector<std::string>())
      << listed(zero_looking(merge_said));
  EXPECT_EQ(without_unit(merge_said), std::vector<std::string>())
      << listed(without_unit(merge_said));
}

// The rules themselves, on text the commands printed before their fixes.
TEST(OutputPropertyRules, CatchWhatTheCommandsPrintedBefore) {
  EXPECT_EQ(zero_looking("  world  all_reduce  0.000003 GB/s  0.000000 GB/s\n").size(), 2u);
  EXPECT_EQ(zero_looking("  other  0.00 MiB  -\n").size(), 1u);
  EXPECT_EQ(zero_looking("with 0.23 ms per stage crossing, 0.00089 ms between actions\n").size(),
            1u);
  EXPECT_TRUE(zero_looking("  other  256 B  0 ms  3.1e-06 GB/s  10.0 ms  v1.0.2\n").empty());
  EXPECT_EQ(without_unit("size (B) 131072  ratio 0.75\n").size(), 1u);
  EXPECT_TRUE(without_unit("12.4 GB/s, 3.21 KiB, 85.2%, 4.2k tok/s, 1.5 s\n").empty());
  EXPECT_TRUE(agrees("7.66", 7.655));
  EXPECT_FALSE(agrees("7.66", 7.68));
}

}  // namespace
}  // namespace partrain
