// A Store for ranks that are threads of one process: unit tests and world size 1.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "runner/rendezvous/store.h"

namespace partrain::rendezvous {

class InMemoryStore final : public Store {
 public:
  Status set(std::string_view key, std::string_view value) override;
  StatusOr<std::string> get(std::string_view key, Nanoseconds timeout) override;
  StatusOr<int64_t> add(std::string_view key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, Nanoseconds timeout) override;
  StatusOr<bool> check(const std::vector<std::string>& keys) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace partrain::rendezvous
