#include "runner/rendezvous/in_memory_store.h"

#include <charconv>

namespace partrain::rendezvous {

Status InMemoryStore::set(std::string_view key, std::string_view value) {
  {
    std::lock_guard lock(mutex_);
    values_.insert_or_assign(std::string(key), std::string(value));
  }
  changed_.notify_all();
  return Status::ok();
}

StatusOr<std::string> InMemoryStore::get(std::string_view key, Nanoseconds timeout) {
  std::unique_lock lock(mutex_);
  auto found = [&] { return values_.find(key) != values_.end(); };
  if (!changed_.wait_for(lock, timeout, found)) {
    return timeout_error("rendezvous key '{}' was not set within {}", key,
                         format_duration(timeout));
  }
  return values_.find(key)->second;
}

StatusOr<int64_t> InMemoryStore::add(std::string_view key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(key);
    int64_t current = 0;
    if (it != values_.end()) {
      auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(),
                                       current);
      if (ec != std::errc()) return failed("rendezvous key '{}' does not hold an integer", key);
    }
    result = current + delta;
    values_.insert_or_assign(std::string(key), std::to_string(result));
  }
  changed_.notify_all();
  return result;
}

Status InMemoryStore::wait(const std::vector<std::string>& keys, Nanoseconds timeout) {
  std::unique_lock lock(mutex_);
  auto all_present = [&] {
    for (const auto& key : keys) {
      if (values_.find(key) == values_.end()) return false;
    }
    return true;
  };
  if (changed_.wait_for(lock, timeout, all_present)) return Status::ok();
  std::string missing;
  for (const auto& key : keys) {
    if (values_.find(key) == values_.end()) missing += (missing.empty() ? "" : ", ") + key;
  }
  return timeout_error("rendezvous keys not set within {}: {}", format_duration(timeout), missing);
}

StatusOr<bool> InMemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  for (const auto& key : keys) {
    if (values_.find(key) == values_.end()) return false;
  }
  return true;
}

}  // namespace partrain::rendezvous
