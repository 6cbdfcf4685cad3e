// Which peers still write their heartbeat keys: the store records, for keys under one prefix of
// partrain's key space, when each was last written, its value, and whether the connection that
// wrote it is still open. Node 0's launcher, in the store's own process, reads it to name a
// node that disappeared (a closed connection at once, a silent one after a few seconds) without
// a round trip per node. Written by the loop thread, read by others.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace partrain::rendezvous {

struct KeyLiveness {
  int64_t last_write_ns = 0;  // monotonic
  std::string value;          // as last written
  bool writer_connected = true;
  int64_t disconnected_ns = 0;  // when the writer's connection closed
};

class KeyLivenessTable {
 public:
  explicit KeyLivenessTable(std::string prefix) : prefix_(std::move(prefix)) {}

  bool watches(std::string_view key) const { return !prefix_.empty() && key.starts_with(prefix_); }
  void written(std::string_view key, std::string_view value, uint64_t connection, int64_t now_ns);
  void connection_closed(uint64_t connection, int64_t now_ns);
  // Keys without the prefix.
  std::map<std::string, KeyLiveness> snapshot() const;

 private:
  std::string prefix_;
  mutable std::mutex mutex_;
  std::map<std::string, KeyLiveness, std::less<>> keys_;
  std::map<std::string, uint64_t, std::less<>> writers_;  // key -> the connection that wrote it
  std::unordered_map<uint64_t, std::vector<std::string>> by_writer_;
};

}  // namespace partrain::rendezvous
