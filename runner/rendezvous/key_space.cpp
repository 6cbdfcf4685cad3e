#include "runner/rendezvous/key_space.h"

#include <algorithm>
#include <charconv>

#include "core/byte_size.h"

namespace partrain::rendezvous {
namespace {

uint64_t entry_cost(std::string_view key) { return key.size() + KeySpace::kEntryOverheadBytes; }

}  // namespace

bool ByteBudget::try_take(uint64_t bytes) {
  if (bytes > limit_ - used_) return false;
  used_ += bytes;
  return true;
}

KeySpace::KeySpace(uint64_t byte_limit) : budget_(std::make_shared<ByteBudget>(byte_limit)) {}

KeySpace::~KeySpace() = default;

Value KeySpace::make_value(std::string bytes) {
  const uint64_t size = bytes.size();
  if (!budget_->try_take(size)) return nullptr;
  // The deleter holds the budget, so a value outliving the space (a reply still being written
  // when the server stops) gives its bytes back safely.
  return Value(new std::string(std::move(bytes)),
               [budget = budget_, size](const std::string* value) {
                 budget->give_back(size);
                 delete value;
               });
}

Status KeySpace::store(std::string_view key, Value value) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    if (!budget_->try_take(entry_cost(key))) {
      return failed("the rendezvous store is full ({} of {} used): key '{}' was not set",
                    format_bytes(budget_->used()), format_bytes(budget_->limit()),
                    key.substr(0, 64));
    }
    it = values_.emplace(std::string(key), nullptr).first;
  }
  it->second = std::move(value);
  wake_all(it->first);
  return Status::ok();
}

Value KeySpace::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : it->second;
}

bool KeySpace::present_or_queued(std::string_view key) const {
  if (contains(key)) return true;
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

std::vector<std::string> KeySpace::keys() const {
  std::vector<std::string> names;
  names.reserve(values_.size());
  for (const auto& [key, value] : values_) names.push_back(key);
  return names;
}

Status KeySpace::set(std::string_view key, std::string value) {
  const uint64_t size = value.size();
  Value stored = make_value(std::move(value));
  if (!stored) {
    return failed("the rendezvous store is full ({} of {} used): a value of {} for key '{}' "
                  "does not fit",
                  format_bytes(budget_->used()), format_bytes(budget_->limit()),
                  format_bytes(size), key.substr(0, 64));
  }
  return store(key, std::move(stored));
}

StatusOr<int64_t> KeySpace::add(std::string_view key, int64_t delta) {
  int64_t current = 0;
  if (Value old = find(key)) {
    auto [end, ec] = std::from_chars(old->data(), old->data() + old->size(), current);
    if (ec != std::errc() || end != old->data() + old->size()) {
      return failed("rendezvous key '{}' does not hold an integer", key.substr(0, 64));
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return failed("adding {} to rendezvous key '{}' ({}) overflows", delta, key.substr(0, 64),
                  current);
  }
  RETURN_IF_ERROR(set(key, std::to_string(sum)));
  return sum;
}

Status KeySpace::append(std::string_view key, std::string_view bytes) {
  std::string joined;
  if (Value old = find(key)) joined = *old;
  joined.append(bytes);
  return set(key, std::move(joined));
}

StatusOr<Value> KeySpace::compare_set(std::string_view key, std::string expected,
                                      std::string desired) {
  Value current = find(key);
  if (!current && !expected.empty()) {
    wake_all(std::string(key));
    Value answer = make_value(std::move(expected));
    if (!answer) return failed("the rendezvous store is full");
    return answer;
  }
  if (!current || *current == expected) {
    RETURN_IF_ERROR(set(key, std::move(desired)));
    return find(key);
  }
  wake_all(std::string(key));
  return current;
}

bool KeySpace::erase(std::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  budget_->give_back(entry_cost(key));
  values_.erase(it);
  return true;
}

Status KeySpace::queue_push(std::string_view queue, std::string value) {
  const uint64_t size = value.size();
  auto it = queues_.find(queue);
  const bool is_new = it == queues_.end();
  if (is_new && !budget_->try_take(entry_cost(queue))) {
    return failed("the rendezvous store is full: queue '{}' was not created", queue.substr(0, 64));
  }
  Value stored = make_value(std::move(value));
  if (!stored) {
    if (is_new) budget_->give_back(entry_cost(queue));
    return failed("the rendezvous store is full: a value of {} for queue '{}' does not fit",
                  format_bytes(size), queue.substr(0, 64));
  }
  if (is_new) it = queues_.emplace(std::string(queue), std::deque<Value>()).first;
  it->second.push_back(std::move(stored));
  wake_one(it->first);
  return Status::ok();
}

std::optional<Value> KeySpace::queue_pop(std::string_view queue) {
  auto it = queues_.find(queue);
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  Value front = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) {
    budget_->give_back(entry_cost(queue));
    queues_.erase(it);
  }
  return front;
}

size_t KeySpace::queue_length(std::string_view queue) const {
  auto it = queues_.find(queue);
  return it == queues_.end() ? 0 : it->second.size();
}

bool KeySpace::wait_for(WaiterId waiter, const std::vector<std::string>& keys) {
  forget(waiter);
  const bool all_present = std::all_of(keys.begin(), keys.end(), [&](const std::string& key) {
    return present_or_queued(key);
  });
  if (all_present) return false;
  Wait wait;
  for (const std::string& key : keys) {
    if (contains(key)) continue;
    // A key named twice is awaited once: one SET satisfies both.
    if (std::find(wait.keys.begin(), wait.keys.end(), key) != wait.keys.end()) continue;
    wait.keys.push_back(key);
    by_key_[key].push_back(waiter);
  }
  if (wait.keys.empty()) return false;
  waits_.emplace(waiter, std::move(wait));
  return true;
}

StatusOr<bool> KeySpace::arrive_at_barrier(WaiterId waiter, std::string_view key,
                                           int64_t world_size) {
  int64_t count = 1;
  if (Value old = find(key)) {
    auto [end, ec] = std::from_chars(old->data(), old->data() + old->size(), count);
    if (ec != std::errc() || end != old->data() + old->size()) {
      return failed("barrier key '{}' does not hold an integer", key.substr(0, 64));
    }
    count += 1;
  }
  // Stored without waking anyone: the barrier's waiters wait for the count, not for the key.
  Value stored = make_value(std::to_string(count));
  if (!stored) return failed("the rendezvous store is full");
  auto it = values_.find(key);
  if (it == values_.end()) {
    if (!budget_->try_take(entry_cost(key))) return failed("the rendezvous store is full");
    it = values_.emplace(std::string(key), nullptr).first;
  }
  it->second = std::move(stored);
  if (count >= world_size) {
    wake_all(it->first);
    return true;
  }
  forget(waiter);
  by_key_[it->first].push_back(waiter);
  waits_.emplace(waiter, Wait{{it->first}});
  return false;
}

void KeySpace::cancel_wait(WaiterId waiter) { forget(waiter); }

std::vector<WaiterId> KeySpace::take_ready() { return std::exchange(ready_, {}); }

void KeySpace::wake_all(const std::string& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  std::vector<WaiterId> waiters = std::move(it->second);
  by_key_.erase(it);
  for (WaiterId waiter : waiters) satisfy(waiter, key);
}

// A queue's value goes to one popper, so a push wakes one of the clients waiting on it.
void KeySpace::wake_one(const std::string& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  const WaiterId woken = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) by_key_.erase(it);
  satisfy(woken, key);
}

void KeySpace::satisfy(WaiterId waiter, const std::string& key) {
  auto wait = waits_.find(waiter);
  if (wait == waits_.end()) return;
  std::erase(wait->second.keys, key);
  if (wait->second.keys.empty()) {
    waits_.erase(wait);
    ready_.push_back(waiter);
  }
}

void KeySpace::forget(WaiterId waiter) {
  auto wait = waits_.find(waiter);
  if (wait == waits_.end()) return;
  for (const std::string& key : wait->second.keys) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) continue;
    std::erase(it->second, waiter);
    if (it->second.empty()) by_key_.erase(it);
  }
  waits_.erase(wait);
}

}  // namespace partrain::rendezvous
