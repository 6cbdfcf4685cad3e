// The endpoint's hang flag on a real hung run (labelled long: it waits out the 30 s of silence
// that counts as a hang before any watchdog fires): rank 1 stops at step 3 and issues no further
// collective, rank 0 waits for it in the next all-reduce; the page then says hung long before
// --collective-timeout. Both fell silent within one step, where the trace cannot tell the blocked
// rank from the one that never came (collectives are recorded when they end): rank 0, blocked,
// must not be blamed (the flight recorder's diagnosis names rank 1 once the watchdog fires).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"
#include "tests/integration/metrics_scrape.h"
#include "tests/support/scratch_dir.h"

namespace partrain::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Samples scrape(int port) {
  return parse_samples(
      run_shell(fmt::format("curl -sS --max-time 5 http://127.0.0.1:{}/metrics", port)).out);
}

TEST(MetricsHang, SilenceIsAHangWithoutBlamingTheBlockedRank) {
  if (run_shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl is not installed";
  ScratchDir dir;
  const int port = free_port();
  LaunchedProcess launch({partrain_binary(),
                          "launch",
                          "-n",
                          "2",
                          "--workload",
                          "mlp",
                          "--layers",
                          "2",
                          "--hidden",
                          "64",
                          "--steps",
                          "100",
                          "--inject",
                          "hang:rank=1,step=3",
                          "--collective-timeout",
                          "600s",
                          "--metrics-addr",
                          "127.0.0.1",
                          "--metrics-port",
                          std::to_string(port),
                          "--trace",
                          (dir.path() / "run.db").string()});
  ASSERT_TRUE(launch.wait_for_stderr("hanging at step 3", 60s)) << launch.finish().err;
  Samples page;
  const auto give_up = Clock::now() + 90s;
  bool hung = false;
  while (!hung && Clock::now() < give_up) {
    page = scrape(port);
    hung = page["partrain_hang"] == 1;
    EXPECT_EQ(page.count("partrain_run_info{run_id=\"\",status=\"running\"}"), 0u);
    (void)launch.wait_for_stderr("\x01never", 1s);  // reads the run's output meanwhile
  }
  ::kill(launch.pid(), SIGINT);
  const Finished finished = launch.finish(120s);
  EXPECT_EQ(finished.exit_code, 130) << finished.err;
  ASSERT_TRUE(hung) << "no hang flag within 90 s";
  EXPECT_EQ(page.count("partrain_hang_culprit{rank=\"0\"}"), 0u);
  EXPECT_GE(page["partrain_rank_quiet_seconds{rank=\"0\"}"],
            page["partrain_hang_threshold_seconds"]);
}

}  // namespace
}  // namespace partrain::testing
