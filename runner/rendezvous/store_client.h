// A rank's connection to the rendezvous store on node 0 (StoreServer): the Store interface over
// one TCP connection, plus the ping that clock-offset estimation uses. Requests are serialised by
// a mutex, so threads of one process may share a client.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "runner/rendezvous/protocol.h"
#include "runner/rendezvous/store.h"

namespace partrain::rendezvous {

class StoreClient final : public Store {
 public:
  // Retries every ~100 ms while the store is not up yet (other nodes may start first); after
  // `timeout` fails with kTimeout naming host:port. `timeout` also bounds how long any reply
  // may take beyond a request's own GET / WAIT timeout.
  static StatusOr<std::unique_ptr<StoreClient>> connect(const std::string& host, uint16_t port,
                                                        std::string token, Nanoseconds timeout,
                                                        StoreLimits limits = {});
  ~StoreClient() override;
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  Status set(std::string_view key, std::string_view value) override;
  StatusOr<std::string> get(std::string_view key, Nanoseconds timeout) override;
  StatusOr<int64_t> add(std::string_view key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, Nanoseconds timeout) override;
  StatusOr<bool> check(const std::vector<std::string>& keys) override;

  // One round trip, timed on this host's monotonic clock around the server's monotonic reading.
  struct ClockSample {
    int64_t send_ns = 0;
    int64_t server_ns = 0;
    int64_t recv_ns = 0;
  };
  StatusOr<ClockSample> ping();

  // The local IP this host used to reach the store: the address other ranks can reach it on.
  std::string local_address() const;

 private:
  StoreClient(int fd, std::string endpoint, std::string token, Nanoseconds io_timeout,
              StoreLimits limits);
  // Sends one request and reads its reply; extra_wait is the request's own server-side wait.
  StatusOr<Reply> round_trip(const Request& request, Nanoseconds extra_wait);
  StatusOr<Reply> round_trip_locked(const Request& request, Nanoseconds extra_wait);

  std::mutex mutex_;
  int fd_ = -1;
  bool broken_ = false;  // a reply was lost mid-frame: the stream is out of step for good
  std::string endpoint_;  // "host:port", for messages
  std::string token_;
  Nanoseconds io_timeout_;
  StoreLimits limits_;
};

}  // namespace partrain::rendezvous
