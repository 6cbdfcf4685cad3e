// A worker's entry into its run: reads the torchrun environment the launcher set (RANK,
// WORLD_SIZE, MASTER_ADDR, ...), connects to the rendezvous store and builds the world
// communicator, recorded so every collective gets its (comm_id, seq).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/duration.h"
#include "core/status.h"
#include "profiler/clock_sync.h"
#include "profiler/flight/flight_recorder.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/rendezvous/store.h"

namespace partrain::runner {

enum class CommBackend { kGloo, kNccl };
std::optional<CommBackend> parse_comm_backend(std::string_view name);
std::string_view comm_backend_name(CommBackend backend);

struct WorkerEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;
  uint16_t master_port = 0;
  std::string token;
  std::string run_id;
  // The launcher's --rdzv-timeout (PARTRAIN_STORE_TIMEOUT), when it set one.
  std::optional<Nanoseconds> store_timeout;
};

// Whether this process was started by a launcher (RANK and WORLD_SIZE are set).
bool launched_as_worker();
// The torchrun variables, checked: a missing or malformed one is named in the error.
StatusOr<WorkerEnv> read_worker_env();

struct World {
  WorkerEnv env;
  std::shared_ptr<rendezvous::Store> store;
  std::unique_ptr<profiler::FlightRecorder> recorder;
  std::unique_ptr<comm::Comm> comm;  // recorded; rank() == env.rank
  // This host's monotonic clock relative to the store host's (node 0), from min-RTT pings at
  // join; unset for a world of one process.
  std::optional<profiler::ClockOffset> clock_offset;
  int64_t clock_measured_ns = 0;  // local monotonic time of that measurement
};

// How much longer than the collective watchdog the backend's own per-operation timeout is: the
// watchdog fires first, dumps the flight recorder and exits 124; the backend's timeout stays a
// backstop (Gloo's own default is 30 s, which would pre-empt a longer watchdog).
inline constexpr Nanoseconds kBackendTimeoutMargin = std::chrono::seconds(60);

struct WorldOptions {
  CommBackend backend = CommBackend::kGloo;
  // Connecting to the store and bootstrapping the communicators; the launcher's --rdzv-timeout
  // (WorkerEnv::store_timeout) takes its place when set.
  Nanoseconds timeout = std::chrono::seconds(300);
  // The collective watchdog's timeout (--collective-timeout); the backend's per-operation
  // timeout is set kBackendTimeoutMargin above it.
  Nanoseconds collective_timeout = std::chrono::seconds(300);
  int clock_pings = 16;
  // Sees every completed or failed collective and transfer (the trace's collective records).
  profiler::FlightRecorder::Sink collective_sink;
  // The rank's device: NCCL orders every operation after its compute stream; Gloo is staged
  // through host copies (comm/host_staged_comm.h) where the device's memory is not host
  // addressable. Null, or the CPU device: host memory, nothing to do.
  Device* device = nullptr;
};

// Joins the run described by the environment; outside a launcher, a world of one rank.
StatusOr<World> join_world(const WorldOptions& options);

}  // namespace partrain::runner
