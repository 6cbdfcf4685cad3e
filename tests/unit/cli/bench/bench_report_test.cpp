#include "cli/bench/bench_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace partrain::bench {
namespace {

std::vector<BenchRow> sample_rows() {
  BenchRow row;
  row.op = "all_reduce";
  row.bytes = 1 << 20;
  row.count = 1 << 18;
  row.type = "float";
  row.redop = "sum";
  row.nranks = 4;
  row.out_of_place = {100.0, 10.48576, 15.72864, 0};
  row.in_place = Measurement{200.0, 5.24288, 7.86432, 3};
  BenchRow p2p;
  p2p.op = "send_recv";
  p2p.bytes = 8;
  p2p.count = 2;
  p2p.type = "float";
  p2p.nranks = 4;
  p2p.out_of_place = {5.0, 0.0016, 0.0016, -1};
  return {row, p2p};
}

TEST(BenchReport, TableHasNcclTestsColumnsAndUnits) {
  BenchOptions options;
  std::string table = format_bench_table(sample_rows(), options, {4, "gloo", "cpu"});
  EXPECT_NE(table.find("out-of-place"), std::string::npos);
  EXPECT_NE(table.find("in-place"), std::string::npos);
  EXPECT_NE(table.find("#wrong"), std::string::npos);
  EXPECT_NE(table.find("(GB/s)"), std::string::npos);
  EXPECT_NE(table.find("(us)"), std::string::npos);
  EXPECT_NE(table.find("1048576"), std::string::npos);
  EXPECT_NE(table.find("15.73"), std::string::npos);
  EXPECT_NE(table.find("N/A"), std::string::npos);  // unchecked
  EXPECT_NE(table.find("Out of bounds values : 3 FAILED"), std::string::npos);
  // As nccl-tests: the mean over every measurement, in place included: (15.73 + 7.86 + 0.0016) / 3.
  // In GB/s, as nccl-tests' parsers read it (never scaled: "3.00 MB/s" would be read as 3 GB/s).
  EXPECT_NE(table.find("Avg bus bandwidth    : 7.86 GB/s"), std::string::npos) << table;
  // The 8-byte send_recv's 0.0016 GB/s printed "0.00" in a GB/s column.
  EXPECT_NE(table.find(" 0.0016  0.0016"), std::string::npos) << table;
  EXPECT_EQ(table.find(" 0.00 "), std::string::npos) << table;
}

// A sweep of tiny messages over a slow link averages 3 MB/s: still in GB/s, the unit nccl-tests'
// parsers take the number in, with its digits (not "0.00").
TEST(BenchReport, FooterBandwidthInGbPerSecond) {
  std::vector<BenchRow> rows = sample_rows();
  rows.erase(rows.begin());
  rows[0].out_of_place.busbw_gbps = 0.003;
  EXPECT_NE(format_bench_footer(rows).find("Avg bus bandwidth    : 0.003 GB/s\n"),
            std::string::npos)
      << format_bench_footer(rows);
}

// -c 0: nothing was compared with the reference, and neither the footer nor --json say "0 wrong".
TEST(BenchReport, UncheckedRunSaysSo) {
  std::vector<BenchRow> rows = sample_rows();
  rows[0].out_of_place.wrong = -1;
  rows[0].in_place->wrong = -1;
  const std::string footer = format_bench_footer(rows);
  EXPECT_NE(footer.find("Out of bounds values : 0 OK (nothing checked: -c 0)\n"), std::string::npos)
      << footer;
  BenchOptions options;
  options.check = false;
  auto doc = nlohmann::json::parse(format_bench_json(rows, options, {4, "gloo", "cpu"}));
  EXPECT_TRUE(doc["wrong"].is_null()) << doc.dump();
  // Checked rows keep the plain nccl-tests line.
  EXPECT_EQ(format_bench_footer(sample_rows()).find("nothing checked"), std::string::npos);
}

TEST(BenchReport, JsonCarriesTheSameFacts) {
  BenchOptions options;
  options.warmup_iters = 3;
  options.iters = 7;
  options.check = false;
  options.average = TimeAverage::kMax;
  auto doc = nlohmann::json::parse(format_bench_json(sample_rows(), options, {4, "gloo", "cpu"}));
  // The table header's facts too.
  EXPECT_EQ(doc["nranks"], 4);
  EXPECT_EQ(doc["warmup_iters"], 3);
  EXPECT_EQ(doc["iters"], 7);
  EXPECT_EQ(doc["checked"], false);
  EXPECT_EQ(doc["time_over_ranks"], "max");
  const std::string table = format_bench_table(sample_rows(), options, {4, "gloo", "cpu"});
  EXPECT_NE(table.find("# warmup iters: 3, iters: 7, check: 0, time: max over ranks"),
            std::string::npos)
      << table;
  ASSERT_EQ(doc["results"].size(), 3u);  // out-of-place + in-place, then send_recv
  const auto& first = doc["results"][0];
  EXPECT_EQ(first["op"], "all_reduce");
  EXPECT_EQ(first["bytes"], 1 << 20);
  EXPECT_DOUBLE_EQ(first["time_us"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(first["busbw_gbps"].get<double>(), 15.72864);
  EXPECT_EQ(first["in_place"], false);
  EXPECT_EQ(doc["results"][1]["in_place"], true);
  EXPECT_EQ(doc["results"][1]["wrong"], 3);
  EXPECT_TRUE(doc["results"][2]["wrong"].is_null());
  // An op that does not reduce: "none" in both, as nccl-tests prints it (--json had "").
  EXPECT_EQ(doc["results"][2]["redop"], "none");
  EXPECT_NE(table.find(" float   none    -1 "), std::string::npos) << table;
  EXPECT_EQ(doc["wrong"], 3);
  EXPECT_NEAR(doc["avg_busbw_gbps"].get<double>(), (15.72864 + 7.86432 + 0.0016) / 3, 1e-12);
}

}  // namespace
}  // namespace partrain::bench
