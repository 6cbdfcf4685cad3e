#include "runner/rendezvous/store_notices.h"

#include "core/clock.h"
#include "core/log.h"

namespace partrain::rendezvous::detail {
namespace {

constexpr int64_t kIntervalNs = 10'000'000'000;

}  // namespace

std::string Notices::kind_of_reason(std::string_view reason) {
  reason = reason.substr(0, reason.find('('));
  std::string kind;
  bool in_figure = false;
  for (size_t i = 0; i < reason.size(); ++i) {
    const char c = reason[i];
    const bool word_start = i == 0 || reason[i - 1] == ' ';
    // A figure: a word that starts with a digit (254, 5e, 0x1f) runs to the next space.
    if (word_start) in_figure = c >= '0' && c <= '9';
    if (c == ' ') in_figure = false;
    if (in_figure) {
      if (kind.empty() || kind.back() != '#') kind += '#';
    } else {
      kind += c;
    }
  }
  while (!kind.empty() && kind.back() == ' ') kind.pop_back();
  return kind;
}

void Notices::note(Notice which, std::string message, std::string_view reason) {
  std::string reason_kind = which == Notice::kRejected ? kind_of_reason(reason) : std::string();
  size_t rejection_kinds = 0;
  for (const auto& [key, unused] : kinds_) rejection_kinds += key.first == Notice::kRejected;
  if (which == Notice::kRejected && rejection_kinds >= kMaxRejectionKinds &&
      !kinds_.contains({which, reason_kind})) {
    reason_kind = "...";  // a flood of distinct reasons: the rest as one kind
  }
  Kind& kind = kinds_[{which, std::move(reason_kind)}];
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
  for (auto& [key, kind] : kinds_) {
    if (kind.held_back > 0 && now_ns - kind.last_said_ns >= kIntervalNs) {
      say_held_back(kind);
      kind.last_said_ns = now_ns;
    }
  }
}

bool Notices::pending() const {
  for (const auto& [key, kind] : kinds_) {
    if (kind.held_back > 0) return true;
  }
  return false;
}

void Notices::flush() {
  for (auto& [key, kind] : kinds_) {
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
