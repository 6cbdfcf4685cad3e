// One key space of the rendezvous store: the values, TCPStore's queues, and the clients parked
// until keys appear. partrain's framed protocol and PyTorch's TCPStore protocol each get their
// own, so neither can read or overwrite the other's keys. Used by the server's event loop only
// (one thread), so nothing here locks.
//
// Every byte a peer makes the space keep is charged to a fixed budget until the last reference
// to it is gone (a value still being sent to a slow reader included), so no sequence of
// requests can make the store hold more than the budget.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace partrain::rendezvous {

// Bytes a key space may hold, shared by the values it stores and those still in flight.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t limit) : limit_(limit) {}
  bool try_take(uint64_t bytes);
  void give_back(uint64_t bytes) { used_ -= bytes; }
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
};

// An immutable stored value; shared between the table and replies being written.
using Value = std::shared_ptr<const std::string>;

// Who waits: a connection id of the server.
using WaiterId = uint64_t;

class KeySpace {
 public:
  // What one key costs besides its bytes (map node, strings' headers): so a flood of empty keys
  // is bounded too.
  static constexpr uint64_t kEntryOverheadBytes = 96;

  explicit KeySpace(uint64_t byte_limit);
  ~KeySpace();
  KeySpace(const KeySpace&) = delete;
  KeySpace& operator=(const KeySpace&) = delete;

  // nullptr when absent.
  Value find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // As TCPStore's CHECK: a key is there when set, or when a queue of that name is not empty.
  bool present_or_queued(std::string_view key) const;
  size_t size() const { return values_.size(); }
  std::vector<std::string> keys() const;
  uint64_t bytes_used() const { return budget_->used(); }
  uint64_t byte_limit() const { return budget_->limit(); }

  // Each mutation fails with kFailed naming the budget when the bytes do not fit, and wakes the
  // waiters it satisfies (take_ready()).
  Status set(std::string_view key, std::string value);
  // Integers are stored as decimal text, as TCPStore does, so GET reads counters too.
  StatusOr<int64_t> add(std::string_view key, int64_t delta);
  Status append(std::string_view key, std::string_view bytes);
  // TCPStore's compareSet: sets `desired` when the current value is `expected` (an absent key
  // matches an empty `expected`); returns the value the key holds afterwards, or `expected`
  // when the key is absent and `expected` is not empty (as TCPStore answers).
  StatusOr<Value> compare_set(std::string_view key, std::string expected, std::string desired);
  bool erase(std::string_view key);

  Status queue_push(std::string_view queue, std::string value);
  std::optional<Value> queue_pop(std::string_view queue);
  size_t queue_length(std::string_view queue) const;

  // Parks `waiter` until every key in `keys` is set (kept: those already set do not count).
  // Returns false when all are set already (nothing parked). One wait per waiter at a time.
  bool wait_for(WaiterId waiter, const std::vector<std::string>& keys);
  // TCPStore's BARRIER: counts an arrival at `key`; true when this one completes the barrier
  // (the earlier arrivals are woken); otherwise the waiter is parked until it completes.
  StatusOr<bool> arrive_at_barrier(WaiterId waiter, std::string_view key, int64_t world_size);
  void cancel_wait(WaiterId waiter);
  bool waiting(WaiterId waiter) const { return waits_.contains(waiter); }
  // The waiters whose keys all appeared since the last call.
  std::vector<WaiterId> take_ready();

 private:
  struct Wait {
    std::vector<std::string> keys;  // those it still needs, each registered in by_key_
  };
  Value make_value(std::string bytes);
  Status store(std::string_view key, Value value);
  void wake_all(const std::string& key);
  void wake_one(const std::string& key);
  // `key` appeared for `waiter`: one fewer to wait for.
  void satisfy(WaiterId waiter, const std::string& key);
  void forget(WaiterId waiter);

  std::shared_ptr<ByteBudget> budget_;
  std::map<std::string, Value, std::less<>> values_;
  std::map<std::string, std::deque<Value>, std::less<>> queues_;
  std::unordered_map<std::string, std::vector<WaiterId>> by_key_;
  std::unordered_map<WaiterId, Wait> waits_;
  std::vector<WaiterId> ready_;
};

}  // namespace partrain::rendezvous
