#include "profiler/rank_tracer.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <limits>
#include <vector>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"

namespace partrain::profiler {
namespace {

// Room for a typical encoded event (a slice with its name, a collective with its ranks) in one
// allocation; longer ones grow.
constexpr size_t kTypicalEventBytes = 256;

}  // namespace

int restart_attempt_from_env() {
  const StatusOr<std::optional<long long>> count = env::get_int("TORCHELASTIC_RESTART_COUNT");
  if (!count.is_ok() || !count->has_value() || **count < 0 ||
      **count > std::numeric_limits<int32_t>::max()) {
    return 0;
  }
  return static_cast<int>(**count);
}

std::unique_ptr<RankTracer> RankTracer::from_env(int32_t rank) {
  std::optional<std::string> socket = env::get(kCollectorEnv);
  if (!socket || socket->empty()) return nullptr;
  std::optional<std::string> token = env::get(kCollectorTokenEnv);
  if (!token || token->empty()) token = env::get("PARTRAIN_TOKEN");
  if (!token || token->empty()) {
    log::warn("{} is set but neither {} nor PARTRAIN_TOKEN is: this rank is not traced",
              kCollectorEnv, kCollectorTokenEnv);
    return nullptr;
  }
  RankTracerOptions options;
  options.socket_path = *socket;
  options.token = *token;
  options.rank = rank;
  return std::make_unique<RankTracer>(std::move(options));
}

RankTracer::RankTracer(RankTracerOptions options)
    : rank_(options.rank), attempt_(options.attempt), main_thread_(std::this_thread::get_id()) {
  CollectorClientOptions client;
  client.socket_path = options.socket_path;
  client.token = options.token;
  client.rank = options.rank;
  client.connect_timeout = options.connect_timeout;
  client_ = std::make_unique<CollectorClient>(std::move(client));
  recorder_ = std::make_unique<Recorder>(*client_, options.recorder);
}

RankTracer::~RankTracer() {
  recorder_.reset();  // final drain into the client, then the client says goodbye
  client_.reset();
}

void RankTracer::set_clock(const ClockDrift& drift) {
  std::lock_guard lock(clock_write_mutex_);
  const uint64_t version = clock_version_.load(std::memory_order_relaxed);
  clock_version_.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  clock_reference_ns_.store(drift.reference_local_ns, std::memory_order_relaxed);
  clock_offset_ns_.store(drift.offset_at_reference_ns, std::memory_order_relaxed);
  clock_drift_ppm_.store(drift.drift_ppm, std::memory_order_relaxed);
  clock_version_.store(version + 2, std::memory_order_release);
}

int64_t RankTracer::timeline_ns(int64_t local_ns) const {
  ClockDrift drift;  // all zero until the first set_clock: the local clock is the timeline
  while (true) {
    const uint64_t before = clock_version_.load(std::memory_order_acquire);
    drift.reference_local_ns = clock_reference_ns_.load(std::memory_order_relaxed);
    drift.offset_at_reference_ns = clock_offset_ns_.load(std::memory_order_relaxed);
    drift.drift_ppm = clock_drift_ppm_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && clock_version_.load(std::memory_order_relaxed) == before) break;
  }
  return local_ns + drift.offset_at(local_ns);
}

// The calling thread's track, named once per thread: "main" for the tracer's thread.
namespace {
const std::string kMainTrack = "main";
}  // namespace

const std::string& RankTracer::thread_track() const {
  thread_local const std::string other =
      fmt::format("thread {}", static_cast<long>(::syscall(SYS_gettid)));
  return std::this_thread::get_id() == main_thread_ ? kMainTrack : other;
}

void RankTracer::slice(std::string_view name, SliceCategory category, int64_t start_ns,
                       int64_t end_ns, int layer, int micro_batch, std::optional<int64_t> step) {
  slice_on(thread_track(), name, category, start_ns, end_ns, layer, micro_batch, step);
}

void RankTracer::main_track_slice(std::string_view name, SliceCategory category, int64_t start_ns,
                                  int64_t end_ns) {
  slice_on(kMainTrack, name, category, start_ns, end_ns, -1, -1, std::nullopt);
}

void RankTracer::slice_on(const std::string& track, std::string_view name, SliceCategory category,
                          int64_t start_ns, int64_t end_ns, int layer, int micro_batch,
                          std::optional<int64_t> step) {
  SliceEvent e;
  e.rank = rank_;
  e.track_kind = TrackKind::kCpuThread;
  e.track = track;
  e.name = name;
  e.category = category;
  e.ts_ns = timeline_ns(start_ns);
  e.dur_ns = end_ns - start_ns;
  e.step = step.value_or(this->step());
  e.micro_batch = micro_batch;
  e.layer = layer;
  emit(e);
}

void RankTracer::set_step(int64_t step) {
  const int64_t now = monotonic_ns();
  step_.store(step, std::memory_order_relaxed);
  std::lock_guard lock(step_history_mutex_);
  step_history_.emplace_back(now, step);
  if (step_history_.size() > kStepHistory) step_history_.pop_front();
}

int64_t RankTracer::step_at(int64_t local_ns) const {
  std::lock_guard lock(step_history_mutex_);
  // The first change after local_ns; the one before it is the step then.
  auto after = std::upper_bound(step_history_.begin(), step_history_.end(), local_ns,
                                [](int64_t ns, const auto& change) { return ns < change.first; });
  return after == step_history_.begin() ? -1 : std::prev(after)->second;
}

void RankTracer::collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                            int64_t gpu_end_ns) {
  CollectiveRecord record;
  record.world_rank = rank_;
  // The step the call was made in: an NCCL call is written once its kernels are known.
  const int64_t issued_ns = event.start_ns > 0 ? event.start_ns : event.enqueue_ns;
  record.step = issued_ns > 0 ? step_at(issued_ns) : step();
  if (gpu_start_ns >= 0 && gpu_end_ns >= gpu_start_ns) {
    record.gpu_start_ns = timeline_ns(gpu_start_ns);
    record.gpu_end_ns = timeline_ns(gpu_end_ns);
  }
  record.event = event;
  record.event.enqueue_ns = timeline_ns(event.enqueue_ns);
  record.event.start_ns = timeline_ns(event.start_ns);
  record.event.end_ns = timeline_ns(event.end_ns);
  // The trace names peers and roots by world rank (the communicator's rank is in comm_rank).
  if (event.peer >= 0 && static_cast<size_t>(event.peer) < event.group_ranks.size()) {
    record.event.peer = event.group_ranks[static_cast<size_t>(event.peer)];
  }
  emit(record);
}

void RankTracer::memory(uint8_t category, int64_t local_ns, int64_t bytes_in_use) {
  emit(MemorySample{rank_, category, timeline_ns(local_ns), bytes_in_use});
}

void RankTracer::step_done(int64_t step_index, int64_t start_ns, int64_t end_ns, double loss,
                           int64_t tokens) {
  emit(StepEvent{rank_, step_index, timeline_ns(start_ns), end_ns - start_ns, loss, tokens,
                 attempt_});
  if (step_listener_) step_listener_();
}

void RankTracer::expert_load(int64_t step_index, int layer,
                             std::span<const int64_t> tokens_per_expert, int64_t dropped_tokens,
                             double aux_loss) {
  ExpertLoadRecord record;
  record.rank = rank_;
  record.step = step_index;
  record.layer = layer;
  record.tokens_per_expert.assign(tokens_per_expert.begin(), tokens_per_expert.end());
  record.dropped_tokens = dropped_tokens;
  record.aux_loss = aux_loss;
  emit(record);
}

void RankTracer::emit(const TraceEvent& event) {
  // The event's own buffer (the recorder copies the bytes): one allocation, as the event's strings
  // already cost, and no per-thread scratch outliving it.
  std::vector<uint8_t> encoded;
  encoded.reserve(kTypicalEventBytes);
  encode_event(event, encoded);
  // One record = one encoded event (its own size and type header); the collector decodes it.
  recorder_->record(std::span<const uint8_t>(encoded));
}

bool RankTracer::flush(std::chrono::milliseconds timeout) { return recorder_->flush(timeout); }

}  // namespace partrain::profiler
