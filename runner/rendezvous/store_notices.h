// What the store says about peers it turns away, without letting a flood of them flood the
// launcher's stderr: the first of each kind at once, the rest counted and summed up at most
// every 10 s.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace partrain::rendezvous::detail {

enum class Notice { kRefused, kShed, kTimedOut, kRejected };

class Notices {
 public:
  void note(Notice kind, std::string message);
  // Says what was held back once its interval is over.
  void tick(int64_t now_ns);
  bool pending() const;
  // Says whatever is held back (the store is stopping).
  void flush();

 private:
  struct Kind {
    int64_t last_said_ns = -1;
    uint64_t held_back = 0;
    std::string last_message;
  };
  void say_held_back(Kind& kind);
  std::array<Kind, 4> kinds_;
};

}  // namespace partrain::rendezvous::detail
