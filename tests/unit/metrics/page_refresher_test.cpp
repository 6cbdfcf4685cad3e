// The refresher over a real trace file, as the launcher runs it: nothing but the exporter's own
// figures before the file exists, then the run as the dashboard reads it (the fixture's
// hand-computed step, memory and matched all-reduce), in both formats.
#include "metrics/page_refresher.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/scratch_dir.h"
#include "tests/unit/tui/tui_fixture.h"

namespace partrain::metrics {
namespace {

using namespace std::chrono_literals;
using testing::kMiB;
using testing::kMs;

bool has(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos;
}

// The page once it has `line`, or the last one seen after 20 s.
std::string page_with(const PageRefresher& refresher, const std::string& line) {
  std::string page;
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < give_up) {
    page = refresher.page()->open_metrics_text;
    if (has(page, line)) break;
    std::this_thread::sleep_for(20ms);
  }
  return page;
}

TEST(PageRefresher, FollowsTheTraceOnceItAppears) {
  testing::ScratchDir dir;
  const std::filesystem::path path = dir.path() / "run.db";
  PageRefresher refresher(path, 50ms);
  refresher.start();
  std::this_thread::sleep_for(150ms);
  const std::string before = refresher.page()->prometheus_text;
  EXPECT_EQ(before.find("partrain_run_info"), std::string::npos) << before;
  EXPECT_NE(before.find("partrain_metrics_refreshes_total"), std::string::npos) << before;

  auto writer = profiler::TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  std::vector<profiler::TraceEvent> events = testing::two_rank_run_start();
  for (int64_t step = 0; step < 3; ++step) {
    for (auto& e : testing::two_rank_step(step, step * 100 * kMs)) events.push_back(e);
  }
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->commit().is_ok());

  const std::string page = page_with(refresher, "partrain_step{rank=\"1\"} 2");
  EXPECT_TRUE(has(page, "partrain_run_info{run_id=\"run-tui\",status=\"running\"} 1")) << page;
  EXPECT_TRUE(has(page, "partrain_step_duration_seconds{rank=\"0\"} 0.1")) << page;
  // 1000 tokens in 100 ms.
  EXPECT_TRUE(has(page, "partrain_tokens_per_second{rank=\"0\"} 10000")) << page;
  EXPECT_TRUE(has(page, "partrain_loss{rank=\"1\"} 2.5")) << page;
  EXPECT_TRUE(has(page, fmt::format("partrain_memory_bytes{{rank=\"0\",category=\"activations\"}} "
                                    "{}",
                                    2 * kMiB)))
      << page;
  // Rank 0 computes 60 ms, waits in the all-reduce 30 ms (exposed), idles 10 ms.
  EXPECT_TRUE(has(page, "partrain_step_activity_seconds{rank=\"0\",activity=\"compute\"} 0.06"))
      << page;
  EXPECT_TRUE(
      has(page, "partrain_step_activity_seconds{rank=\"0\",activity=\"exposed_comm\"} 0.03"))
      << page;
  // The all-reduce of step 2: members of 30 and 10 ms (median 20 ms), 20 ms apart; 1 MiB over
  // 2 ranks is busbw = S/t x 2(n-1)/n = 1 MiB / 20 ms.
  EXPECT_TRUE(
      has(page,
          "partrain_collective_seq{comm=\"dp\",op=\"all_reduce\",size_bucket_bytes=\"1048576\"} 2"))
      << page;
  EXPECT_TRUE(has(page,
                  "partrain_collective_duration_seconds{comm=\"dp\",op=\"all_reduce\",size_bucket_"
                  "bytes=\"1048576\"} 0.02"))
      << page;
  EXPECT_TRUE(has(page,
                  "partrain_collective_skew_seconds{comm=\"dp\",op=\"all_reduce\",size_bucket_"
                  "bytes=\"1048576\"} 0.02"))
      << page;
  EXPECT_TRUE(has(page, fmt::format("partrain_collective_busbw_bytes_per_second{{comm=\"dp\","
                                    "op=\"all_reduce\",size_bucket_bytes=\"1048576\"}} {}",
                                    kMiB * 50)))
      << page;
  EXPECT_TRUE(page.ends_with("# EOF\n"));
  EXPECT_EQ(refresher.page()->prometheus_text.find("# EOF"), std::string::npos);
}

// The run's end reaches the page: finish() refreshes once more, so the final status, the last
// steps and a diagnosis the launcher recorded as the run ended (it exits about a second later,
// before the next refresh) are served, though the interval would not have come round. Before,
// `status` stayed "running" and the diagnosis was never on the page.
TEST(PageRefresher, FinishServesTheRunsEndAndItsDiagnosis) {
  testing::ScratchDir dir;
  const std::filesystem::path path = dir.path() / "run.db";
  auto writer = profiler::TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  std::vector<profiler::TraceEvent> events = testing::two_rank_run_start();
  for (auto& e : testing::two_rank_step(0, 0)) events.push_back(e);
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->commit().is_ok());
  PageRefresher refresher(path, std::chrono::hours(1));
  refresher.start();
  const std::string live = page_with(refresher, "partrain_step{rank=\"1\"} 0");
  ASSERT_TRUE(has(live, "partrain_run_info{run_id=\"run-tui\",status=\"running\"} 1")) << live;
  EXPECT_FALSE(refresher.page()->final);

  events.clear();
  for (int64_t step = 1; step < 3; ++step) {
    for (auto& e : testing::two_rank_step(step, step * 100 * kMs)) events.push_back(e);
  }
  events.push_back(profiler::StatEvent{"collective_diagnosis", 1, 1, profiler::StatSeverity::kError,
                                       "rank 1 never issued all_reduce (dp seq 3)"});
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->set_run_status(profiler::RunStatus::kFailed, 1).is_ok());
  writer->reset();
  refresher.finish();
  const std::shared_ptr<const MetricsPage> page = refresher.page();
  EXPECT_TRUE(page->final);
  const std::string& text = page->open_metrics_text;
  EXPECT_TRUE(has(text, "partrain_run_info{run_id=\"run-tui\",status=\"failed\"} 1")) << text;
  EXPECT_TRUE(has(text, "partrain_step{rank=\"1\"} 2")) << text;
  EXPECT_TRUE(has(text, "partrain_hang 1")) << text;
  EXPECT_TRUE(has(text, "partrain_hang_culprit{rank=\"1\"} 1")) << text;
  refresher.finish();  // idempotent, as the destructor calls it again
}

// A mixture-of-experts run's routing reaches the page once the analysis has run over it: layer 1
// sends 30 and 10 assignments to its two experts in steps 1 and 2 (step 0 is the warm-up the
// window skips): max / mean 30 / 20 = 1.5, expert 0 has 75%.
TEST(PageRefresher, ExpertLoadOfTheLatestAnalysis) {
  testing::ScratchDir dir;
  const std::filesystem::path path = dir.path() / "run.db";
  PageRefresher refresher(path, 50ms);
  refresher.start();
  auto writer = profiler::TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  std::vector<profiler::TraceEvent> events = testing::two_rank_run_start();
  for (int64_t step = 0; step < 3; ++step) {
    for (auto& e : testing::two_rank_step(step, step * 100 * kMs)) events.push_back(e);
    const std::vector<int64_t> tokens =
        step == 0 ? std::vector<int64_t>{40, 0} : std::vector<int64_t>{30, 10};
    events.push_back(profiler::ExpertLoadRecord{0, step, 1, tokens, step == 2 ? 4 : 0, 0.02});
  }
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->commit().is_ok());

  const std::string page =
      page_with(refresher, "partrain_moe_load_ratio{layer=\"1\",over=\"experts\"} 1.5");
  EXPECT_TRUE(has(page, "partrain_moe_load_ratio{layer=\"1\",over=\"experts\"} 1.5")) << page;
  EXPECT_TRUE(has(page, "partrain_moe_hottest_expert_tokens_ratio{layer=\"1\",expert=\"0\"} 0.75"))
      << page;
  // 4 of the window's 80 assignments dropped.
  EXPECT_TRUE(has(page, "partrain_moe_dropped_tokens_ratio{layer=\"1\"} 0.05")) << page;
  EXPECT_TRUE(has(page, "partrain_moe_assignments_per_step{layer=\"1\"} 40")) << page;
  EXPECT_TRUE(has(page, "partrain_moe_aux_loss{layer=\"1\"} 0.02")) << page;
}

}  // namespace
}  // namespace partrain::metrics
