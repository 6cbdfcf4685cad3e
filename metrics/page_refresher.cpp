#include "metrics/page_refresher.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "analyzers/analysis_cadence.h"
#include "analyzers/live_run_follower.h"
#include "core/clock.h"
#include "core/log.h"
#include "metrics/run_metrics.h"
#include "profiler/trace_open.h"

namespace partrain::metrics {
namespace {

// The refresher's niceness: it takes a core only when the ranks leave one.
constexpr int kRefreshNice = 19;

std::shared_ptr<MetricsPage> render_page(const std::vector<MetricFamily>& families) {
  auto page = std::make_shared<MetricsPage>();
  page->prometheus_text = render(families, ExpositionFormat::kPrometheusText);
  page->open_metrics_text = render(families, ExpositionFormat::kOpenMetrics);
  return page;
}

}  // namespace

PageRefresher::PageRefresher(std::filesystem::path trace, std::chrono::milliseconds interval)
    : trace_(std::move(trace)), interval_(interval) {
  page_ = render_page(RunMetrics().families(analyzers::LiveRun{}, monotonic_ns(), RefreshCost{}));
}

PageRefresher::~PageRefresher() { finish(); }

void PageRefresher::start() {
  thread_ = std::thread([this] { run(); });
}

std::shared_ptr<const MetricsPage> PageRefresher::page() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return page_;
}

void PageRefresher::publish(std::shared_ptr<const MetricsPage> page) {
  std::lock_guard<std::mutex> lock(mutex_);
  page_ = std::move(page);
}

struct PageRefresher::Following {
  std::unique_ptr<analyzers::LiveRunFollower> follower;
  analyzers::LiveRun run;
  analyzers::AnalysisCadence cadence;
  RunMetrics metrics;
  RefreshCost cost;
  bool changed_since_analysis = false;
  bool warned = false;
};

void PageRefresher::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const MetricsPage> PageRefresher::refresh(Following& f, bool final) {
  const int64_t started = monotonic_ns();
  Status refreshed = Status::ok();
  if (!f.follower) {
    // Until the run's collector has created the file with its schema, opening fails: retried.
    std::error_code exists_error;
    if (std::filesystem::exists(trace_, exists_error)) {
      auto opened = analyzers::LiveRunFollower::open(trace_);
      if (opened.is_ok()) f.follower = std::move(*opened);
    }
  }
  if (f.follower) {
    f.cost.trace_open = true;
    StatusOr<bool> changed = f.follower->refresh(f.run);
    refreshed = changed.status();
    if (changed.is_ok() && *changed) {
      f.cadence.trace_changed();
      f.changed_since_analysis = true;
    }
    const int64_t now = monotonic_ns();
    // The final page: the analyses once more when the trace changed (a launcher's diagnosis,
    // the last steps), whatever the cadence says; their cost is that of one more run.
    const bool analyse = final ? f.changed_since_analysis : f.cadence.due(now);
    if (refreshed.is_ok() && analyse) {
      refreshed = analyzers::refresh_analysis(f.follower->reader(), f.run.analysis);
      f.cadence.ran(now, monotonic_ns());
      f.changed_since_analysis = false;
    }
  }
  if (!refreshed.is_ok() && !f.warned) {
    // The profiler's rule: say it once, keep serving what was read, and carry on.
    log::warn("metrics: reading {} failed: {}; serving what was read before", trace_.string(),
              refreshed.message());
    f.warned = true;
  }
  const int64_t now = monotonic_ns();
  f.metrics.observe(f.run, now);
  ++f.cost.refreshes;
  std::shared_ptr<MetricsPage> page = render_page(f.metrics.families(f.run, now, f.cost));
  page->final = final;
  f.cost.refresh_ns = monotonic_ns() - started;
  return page;
}

void PageRefresher::run() {
  ::pthread_setname_np(::pthread_self(), "metrics-refresh");  // as `top -H` shows it
  // Linux applies a thread id's niceness to that thread alone.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), kRefreshNice) != 0) {
    log::debug("metrics: cannot lower the refresher's priority");
  }
  Following following;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    publish(refresh(following, false));
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
  lock.unlock();
  publish(refresh(following, true));
  if (following.follower) {
    following.follower.reset();
    profiler::settle_finished_trace(trace_);  // its writer could not while this read it
  }
}

}  // namespace partrain::metrics
