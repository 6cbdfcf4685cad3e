// Keeps the metrics page of a run up to date, on a thread of its own in the launcher (or `partrain
// trace`), never in a training process: it follows the node's trace file exactly as the live
// dashboard does (analyzers::LiveRunFollower reads what arrived since the last refresh;
// AnalysisCadence bounds the analyses to 1/40 of a core), turns the run into metric families
// (run_metrics.h) and renders both text formats once per refresh, so a scrape only copies a
// string whatever the scrape rate. The thread runs at nice 19: under CPU contention it yields to
// the ranks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "metrics/http_request.h"

namespace partrain::metrics {

class PageRefresher {
 public:
  static constexpr std::chrono::milliseconds kDefaultInterval{1000};

  // Follows `trace` (which may not exist yet: the run creates it once its ranks have met).
  explicit PageRefresher(std::filesystem::path trace,
                         std::chrono::milliseconds interval = kDefaultInterval);
  ~PageRefresher();  // stops and joins the thread
  PageRefresher(const PageRefresher&) = delete;
  PageRefresher& operator=(const PageRefresher&) = delete;

  void start();
  // Stops following the trace after one last refresh that runs the analyses if the trace changed
  // since they last ran: the run's final status and figures, and a diagnosis the launcher made
  // as the run ended (seconds before it exits, sooner than a refresh interval), are on the page
  // it leaves, marked final. Idempotent; the destructor calls it.
  void finish();
  // The latest page (never null once constructed: before the first refresh, the exporter's own
  // metrics only).
  std::shared_ptr<const MetricsPage> page() const;

 private:
  struct Following;  // what the refresher's thread keeps between refreshes
  void run();
  // One refresh: reads what arrived, runs the analyses when due (or, for the final page, when
  // the trace changed since they last ran) and renders the page.
  std::shared_ptr<const MetricsPage> refresh(Following& following, bool final);
  void publish(std::shared_ptr<const MetricsPage> page);

  std::filesystem::path trace_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::shared_ptr<const MetricsPage> page_;
  std::thread thread_;
};

}  // namespace partrain::metrics
