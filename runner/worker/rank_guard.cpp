#include "runner/worker/rank_guard.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/env.h"
#include "core/log.h"
#include "core/subprocess.h"

namespace partrain::runner {

StatusOr<Nanoseconds> collective_timeout_from_env() {
  ASSIGN_OR_RETURN(std::optional<Nanoseconds> timeout, profiler::collective_timeout_from_env());
  return timeout.value_or(kDefaultCollectiveTimeout);
}

std::unique_ptr<RankGuard> RankGuard::install() {
  // Gloo writes to its peers with writev, which cannot ask for MSG_NOSIGNAL: a peer that died
  // would kill this rank with SIGPIPE before its collective could fail, dump and be diagnosed.
  // Ignored, the write fails with EPIPE and the collective with an error (Python, and so
  // PyTorch's workers, ignore SIGPIPE the same way).
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<RankGuard> guard(new RankGuard());
  guard->signals_ =
      StopSignalWatch::start([g = guard.get()](int signal) { g->on_stop_signal(signal); });
  return guard;
}

RankGuard::~RankGuard() { signals_.reset(); }

void RankGuard::on_stop_signal(int signal) {
  std::lock_guard lock(mutex_);
  if (dumper_ != nullptr) {
    (void)dumper_->dump(profiler::DumpTrigger::kSignal,
                        fmt::format("stopped by {}", signal_name(signal)));
  }
  // Within the launcher's --grace: without this, the steps and collectives recorded since the
  // last shipment were lost, and `analyze` took the healthy ranks for the ones that stopped.
  if (tracer_ != nullptr) (void)tracer_->flush(std::chrono::seconds(2));
}

std::unique_ptr<RankGuard::Watch> RankGuard::watch(const World& world, profiler::RankTracer* tracer,
                                                   Nanoseconds timeout) {
  return std::unique_ptr<Watch>(new Watch(*this, world, tracer, timeout));
}

void RankGuard::linger_for_launcher() { std::this_thread::sleep_for(kPeerFailureGrace); }

RankGuard::Watch::Watch(RankGuard& guard, const World& world, profiler::RankTracer* tracer,
                        Nanoseconds timeout)
    : guard_(guard),
      recorder_(*world.recorder),
      rank_(world.env.rank),
      tracer_(tracer),
      dumper_(*world.recorder, [&] {
        profiler::FlightDumperOptions options;
        options.rank = world.env.rank;
        if (auto dir = env::get(profiler::kFlightDirEnv); dir && !dir->empty()) options.dir = *dir;
        options.tracer = tracer;
        return options;
      }()) {
  {
    std::lock_guard lock(guard_.mutex_);
    guard_.dumper_ = &dumper_;
    guard_.tracer_ = tracer;
  }
  profiler::WatchdogOptions options;
  options.timeout = timeout;
  watchdog_ = std::make_unique<profiler::CollectiveWatchdog>(
      recorder_, options, [this](const profiler::WatchdogTimeout& t) { fire(t); });
}

RankGuard::Watch::~Watch() {
  watchdog_.reset();  // joins its thread: no fire() from here on
  std::lock_guard lock(guard_.mutex_);
  guard_.dumper_ = nullptr;
  guard_.tracer_ = nullptr;
}

bool RankGuard::Watch::dump_after_failure(const Status& status) {
  bool collective_failed = false;
  for (const profiler::CollectiveEvent& e : recorder_.snapshot()) {
    if (e.state == profiler::CollectiveState::kFailed) collective_failed = true;
  }
  const bool dumped = dumper_.dump(collective_failed ? profiler::DumpTrigger::kCollectiveError
                                                     : profiler::DumpTrigger::kRankError,
                                   status.message());
  return dumped && collective_failed;
}

void RankGuard::Watch::fire(const profiler::WatchdogTimeout& timeout) {
  const std::string reason = profiler::describe_watchdog_timeout(timeout);
  log::error("rank {}: collective watchdog: {}; dumping the flight recorder and exiting with 124",
             rank_, reason);
  (void)dumper_.dump(profiler::DumpTrigger::kWatchdog, reason);
  if (tracer_ != nullptr) (void)tracer_->flush(std::chrono::seconds(2));
  // The main thread is blocked inside the backend's collective, which cannot be cancelled (Gloo
  // offers no abort for a running algorithm): the rank ends from here, as PyTorch's watchdog
  // aborts the process (docs/decisions.md).
  std::_Exit(124);
}

}  // namespace partrain::runner
