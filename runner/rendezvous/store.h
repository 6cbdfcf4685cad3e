// The rendezvous key-value store every rank of a run shares (hosted by node 0's launcher): it
// exchanges communicator bootstrap data (Gloo addresses, NCCL unique ids) and counts arrivals.
// Semantics follow torch.distributed's TCPStore: set / blocking get / add / wait / check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/duration.h"
#include "core/status.h"

namespace partrain::rendezvous {

class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(std::string_view key, std::string_view value) = 0;
  // Blocks until the key exists or the timeout passes (kTimeout naming the key).
  virtual StatusOr<std::string> get(std::string_view key, Nanoseconds timeout) = 0;
  // Adds delta to the integer stored at key (0 when absent) and returns the new value.
  virtual StatusOr<int64_t> add(std::string_view key, int64_t delta) = 0;
  // Blocks until every key exists; the timeout error names the keys still missing.
  virtual Status wait(const std::vector<std::string>& keys, Nanoseconds timeout) = 0;
  // Whether every key exists, without blocking.
  virtual StatusOr<bool> check(const std::vector<std::string>& keys) = 0;
};

}  // namespace partrain::rendezvous
