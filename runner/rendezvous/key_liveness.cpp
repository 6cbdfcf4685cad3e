#include "runner/rendezvous/key_liveness.h"

namespace partrain::rendezvous {

void KeyLivenessTable::written(std::string_view key, std::string_view value, uint64_t connection,
                               int64_t now_ns) {
  std::lock_guard lock(mutex_);
  const std::string name(key.substr(prefix_.size()));
  KeyLiveness& entry = keys_[name];
  entry.last_write_ns = now_ns;
  entry.value = std::string(value.substr(0, 256));
  entry.writer_connected = true;
  uint64_t& writer = writers_[name];
  if (writer != connection) by_writer_[connection].push_back(name);
  writer = connection;
}

void KeyLivenessTable::connection_closed(uint64_t connection, int64_t now_ns) {
  std::lock_guard lock(mutex_);
  auto written_by = by_writer_.find(connection);
  if (written_by == by_writer_.end()) return;
  for (const std::string& name : written_by->second) {
    if (writers_[name] != connection) continue;  // written since over another connection
    KeyLiveness& entry = keys_[name];
    if (!entry.writer_connected) continue;
    entry.writer_connected = false;
    entry.disconnected_ns = now_ns;
  }
  by_writer_.erase(written_by);
}

std::map<std::string, KeyLiveness> KeyLivenessTable::snapshot() const {
  std::lock_guard lock(mutex_);
  return std::map<std::string, KeyLiveness>(keys_.begin(), keys_.end());
}

}  // namespace partrain::rendezvous
