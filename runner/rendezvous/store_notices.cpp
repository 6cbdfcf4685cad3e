#include "runner/rendezvous/store_notices.h"

#include "core/clock.h"
#include "core/log.h"

namespace partrain::rendezvous::detail {
namespace {

constexpr int64_t kIntervalNs = 10'000'000'000;

}  // namespace

void Notices::note(Notice which, std::string message) {
  Kind& kind = kinds_[static_cast<size_t>(which)];
  const int64_t now = monotonic_ns();
  if (kind.last_said_ns >= 0 && now - kind.last_said_ns < kIntervalNs) {
    ++kind.held_back;
    kind.last_message = std::move(message);
    return;
  }
  log::warn("{}", message);
  kind.last_said_ns = now;
}

void Notices::tick(int64_t now_ns) {
  for (Kind& kind : kinds_) {
    if (kind.held_back > 0 && now_ns - kind.last_said_ns >= kIntervalNs) {
      say_held_back(kind);
      kind.last_said_ns = now_ns;
    }
  }
}

bool Notices::pending() const {
  for (const Kind& kind : kinds_) {
    if (kind.held_back > 0) return true;
  }
  return false;
}

void Notices::flush() {
  for (Kind& kind : kinds_) {
    if (kind.held_back > 0) say_held_back(kind);
  }
}

void Notices::say_held_back(Kind& kind) {
  if (kind.held_back == 1) {
    log::warn("{}", kind.last_message);
  } else {
    log::warn("{} (and {} more like it in the last {} s)", kind.last_message,
              kind.held_back - 1, kIntervalNs / 1'000'000'000);
  }
  kind.held_back = 0;
}

}  // namespace partrain::rendezvous::detail
