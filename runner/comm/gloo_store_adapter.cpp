#include "runner/comm/gloo_store_adapter.h"

#include <algorithm>
#include <utility>

namespace partrain::comm {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<rendezvous::Store> store, std::string prefix,
                                   Nanoseconds timeout)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  Status status = store_->set(full_key(key), std::string_view(data.data(), data.size()));
  if (!status.is_ok()) throw gloo::IoException(status.message());
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  StatusOr<std::string> value = store_->get(full_key(key), timeout_);
  if (!value.is_ok()) throw gloo::IoException(value.status().message());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& key : keys) full.push_back(full_key(key));
  // Gloo passes its own 30 s default here; the communicator's timeout is the one users set.
  Status status = store_->wait(full, std::max<Nanoseconds>(timeout, timeout_));
  if (!status.is_ok()) throw gloo::IoException(status.message());
}

}  // namespace partrain::comm
