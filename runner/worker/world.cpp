#include "runner/worker/world.h"

#include <algorithm>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/rank_list.h"
#include "runner/comm/gloo_comm.h"
#include "runner/comm/host_staged_comm.h"
#include "runner/comm/nccl_comm.h"
#include "runner/comm/recording_comm.h"
#include "runner/rendezvous/in_memory_store.h"
#include "runner/rendezvous/store_client.h"
#include "runner/worker/clock_resync.h"

namespace partrain::runner {
namespace {

StatusOr<int> required_int(std::string_view name, long long min_value, long long max_value) {
  ASSIGN_OR_RETURN(std::optional<long long> value, env::get_int(name));
  if (!value) {
    return invalid_argument("environment variable {} is not set: start workers with "
                            "`partrain launch` (or torchrun), which sets it",
                            name);
  }
  if (*value < min_value || *value > max_value) {
    return invalid_argument("environment variable {}={} is out of range [{}, {}]", name, *value,
                            min_value, max_value);
  }
  return static_cast<int>(*value);
}

// The launcher's --rdzv-timeout bounds every wait for another rank's key (a rank that never
// started), while the backend's own timeout, also used per collective, may be longer.
class StoreWithWaitBound final : public rendezvous::Store {
 public:
  StoreWithWaitBound(std::shared_ptr<rendezvous::Store> store, Nanoseconds bound)
      : store_(std::move(store)), bound_(bound) {}
  Status set(std::string_view key, std::string_view value) override {
    return store_->set(key, value);
  }
  StatusOr<std::string> get(std::string_view key, Nanoseconds timeout) override {
    return store_->get(key, std::min(timeout, bound_));
  }
  StatusOr<int64_t> add(std::string_view key, int64_t delta) override {
    return store_->add(key, delta);
  }
  Status wait(const std::vector<std::string>& keys, Nanoseconds timeout) override {
    return store_->wait(keys, std::min(timeout, bound_));
  }
  StatusOr<bool> check(const std::vector<std::string>& keys) override {
    return store_->check(keys);
  }

 private:
  std::shared_ptr<rendezvous::Store> store_;
  Nanoseconds bound_;
};

}  // namespace

std::optional<CommBackend> parse_comm_backend(std::string_view name) {
  if (name == "gloo") return CommBackend::kGloo;
  if (name == "nccl") return CommBackend::kNccl;
  return std::nullopt;
}

std::string_view comm_backend_name(CommBackend backend) {
  return backend == CommBackend::kGloo ? "gloo" : "nccl";
}

bool launched_as_worker() { return env::get("RANK") && env::get("WORLD_SIZE"); }

StatusOr<WorkerEnv> read_worker_env() {
  WorkerEnv result;
  ASSIGN_OR_RETURN(result.world_size, required_int("WORLD_SIZE", 1, kMostRanks));
  ASSIGN_OR_RETURN(result.rank, required_int("RANK", 0, result.world_size - 1));
  ASSIGN_OR_RETURN(result.local_world_size, required_int("LOCAL_WORLD_SIZE", 1, result.world_size));
  ASSIGN_OR_RETURN(result.local_rank, required_int("LOCAL_RANK", 0, result.local_world_size - 1));
  ASSIGN_OR_RETURN(int port, required_int("MASTER_PORT", 1, 65535));
  result.master_port = static_cast<uint16_t>(port);
  auto addr = env::get("MASTER_ADDR");
  if (!addr || addr->empty()) {
    return invalid_argument("environment variable MASTER_ADDR is not set: start workers with "
                            "`partrain launch`");
  }
  result.master_addr = *addr;
  result.token = env::get("PARTRAIN_TOKEN").value_or("");
  result.run_id = env::get("PARTRAIN_RUN_ID").value_or("");
  if (auto timeout = env::get("PARTRAIN_STORE_TIMEOUT"); timeout && !timeout->empty()) {
    auto parsed = parse_duration(*timeout);
    if (!parsed.is_ok() || parsed->count() <= 0) {
      return invalid_argument("environment variable PARTRAIN_STORE_TIMEOUT={} is not a positive "
                              "duration (the launcher's --rdzv-timeout)",
                              *timeout);
    }
    result.store_timeout = *parsed;
  }
  return result;
}

StatusOr<World> join_world(const WorldOptions& given) {
  World world;
  WorldOptions options = given;
  if (launched_as_worker()) {
    ASSIGN_OR_RETURN(world.env, read_worker_env());
    options.timeout = world.env.store_timeout.value_or(options.timeout);
    ASSIGN_OR_RETURN(std::unique_ptr<rendezvous::StoreClient> client,
                     rendezvous::StoreClient::connect(world.env.master_addr,
                                                      world.env.master_port, world.env.token,
                                                      options.timeout));
    ASSIGN_OR_RETURN(world.clock_offset, measure_clock_offset(*client, options.clock_pings));
    world.clock_measured_ns = monotonic_ns();
    world.store = std::move(client);
  } else {
    world.store = std::make_shared<rendezvous::InMemoryStore>();
  }

  std::unique_ptr<comm::Comm> base;
  if (options.backend == CommBackend::kGloo) {
    comm::GlooOptions gloo;
    gloo.timeout = std::max(options.timeout, options.collective_timeout + kBackendTimeoutMargin);
    if (auto* client = dynamic_cast<rendezvous::StoreClient*>(world.store.get())) {
      gloo.hostname = client->local_address();  // the address peers can reach this host on
    }
    auto bounded = std::make_shared<StoreWithWaitBound>(world.store, options.timeout);
    ASSIGN_OR_RETURN(base, comm::create_gloo_comm(bounded, world.env.rank,
                                                  world.env.world_size, gloo));
    if (options.device != nullptr && !options.device->host_addressable()) {
      base = comm::stage_through_host(std::move(base), *options.device);
    }
  } else {
#ifdef PARTRAIN_HAVE_CUDA
    comm::NcclCommOptions nccl;
    nccl.cuda_device = world.env.local_rank;
    if (options.device != nullptr) nccl.compute_stream = options.device->compute_stream();
    auto bounded = std::make_shared<StoreWithWaitBound>(world.store, options.timeout);
    ASSIGN_OR_RETURN(base, comm::create_nccl_comm(bounded, world.env.rank,
                                                  world.env.world_size, nccl, "world"));
#else
    return invalid_argument("this partrain was built without CUDA, so the NCCL backend is not "
                            "available: use --backend gloo, or rebuild with -DPARTRAIN_CUDA=ON");
#endif
  }
  world.recorder = std::make_unique<profiler::FlightRecorder>(
      profiler::FlightRecorder::kDefaultCapacity, options.collective_sink);
  world.comm = std::make_unique<comm::RecordingComm>(std::move(base), *world.recorder);
  log::debug("rank {} joined a world of {} ({})", world.env.rank, world.env.world_size,
             comm_backend_name(options.backend));
  return world;
}

}  // namespace partrain::runner
