#include "runner/worker/clock_resync.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/thread_start.h"

namespace partrain::runner {

StatusOr<std::optional<profiler::ClockOffset>> measure_clock_offset(
    rendezvous::StoreClient& client, int pings) {
  std::vector<profiler::PingSample> samples;
  for (int i = 0; i < pings; ++i) {
    ASSIGN_OR_RETURN(auto sample, client.ping());
    samples.push_back({sample.send_ns, sample.server_ns, sample.recv_ns});
  }
  auto offset = profiler::estimate_clock_offset(samples);
  if (offset) {
    log::debug("clock offset to the store host: {} ns +/- {} ns ({} pings)", offset->offset_ns,
               offset->uncertainty_ns, offset->samples);
  }
  return offset;
}

std::unique_ptr<ClockResync> ClockResync::start(const WorkerEnv& env, profiler::ClockOffset first,
                                                int64_t first_local_ns,
                                                profiler::RankInfo identity,
                                                profiler::RankTracer& tracer,
                                                ClockResyncOptions options) {
  auto client = rendezvous::StoreClient::connect(env.master_addr, env.master_port, env.token,
                                                 std::chrono::seconds(10));
  std::unique_ptr<rendezvous::StoreClient> connection;
  // A ping at once: the store drops a connection that sends nothing within its handshake timeout
  // (10 s, the default interval too), which had raced the first round and lost it on some rank.
  Status spoke = client.is_ok() ? (*client)->ping().status() : client.status();
  if (spoke.is_ok()) {
    connection = std::move(*client);
  } else {
    log::warn("rank {}: clock re-sync disabled, the offset measured at join stays in force ({})",
              env.rank, spoke.message());
  }
  std::unique_ptr<ClockResync> resync(
      new ClockResync(std::move(connection), std::move(identity), tracer, options));
  resync->add(first, first_local_ns);
  if (resync->client_) {
    if (Status started = start_thread(resync->thread_, [r = resync.get()] { r->loop(); });
        !started.is_ok()) {
      log::warn("rank {}: clock re-sync disabled, the offset measured at join stays in force ({})",
                env.rank, started.message());
    }
  }
  return resync;
}

ClockResync::ClockResync(std::unique_ptr<rendezvous::StoreClient> client,
                         profiler::RankInfo identity, profiler::RankTracer& tracer,
                         ClockResyncOptions options)
    : client_(std::move(client)), identity_(std::move(identity)), tracer_(tracer),
      options_(options) {}

ClockResync::~ClockResync() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ClockResync::measure_now() {
  if (!client_) return;
  std::lock_guard round(measure_mutex_);
  auto offset = measure_clock_offset(*client_, options_.pings);
  const int64_t now = monotonic_ns();
  if (!offset.is_ok()) {
    // Said once, then no more rounds on a connection that failed.
    log::warn("rank {}: clock re-sync failed, the last offset stays in force ({})", identity_.rank,
              offset.status().message());
    client_.reset();
    return;
  }
  if (*offset) add(**offset, now);
}

profiler::ClockDrift ClockResync::drift() const {
  std::lock_guard lock(mutex_);
  return drift_;
}

void ClockResync::add(const profiler::ClockOffset& offset, int64_t local_ns) {
  profiler::RankInfo info;
  {
    std::lock_guard lock(mutex_);
    observations_.push_back({local_ns, offset.offset_ns});
    drift_ = profiler::fit_clock_drift(observations_).value_or(drift_);
    info = identity_;
    info.clock_offset_ns = drift_.offset_at(local_ns);
    info.clock_uncertainty_ns = offset.uncertainty_ns;
    info.clock_drift_ppm = drift_.drift_ppm;
  }
  tracer_.set_clock(drift());
  tracer_.emit(info);
}

void ClockResync::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (wake_.wait_for(lock, options_.interval, [this] { return stop_; })) break;
    lock.unlock();
    measure_now();
    lock.lock();
  }
}

}  // namespace partrain::runner
