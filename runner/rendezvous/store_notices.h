// What the store says about peers it turns away, without letting a flood of them flood the
// launcher's stderr: the first of each kind at once, the rest counted and summed up at most
// every 10 s. A rejection's kind is its reason (a wrong token, a foreign protocol, a full store
// are each said at once, not folded into whichever came first), with the figures in it left out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace partrain::rendezvous::detail {

enum class Notice { kRefused, kShed, kTimedOut, kRejected };

class Notices {
 public:
  // `reason`: what kind of kRejected it is (the peer's close reason); ignored for the others.
  void note(Notice kind, std::string message, std::string_view reason = {});
  // Says what was held back once its interval is over.
  void tick(int64_t now_ns);
  bool pending() const;
  // Says whatever is held back (the store is stopping).
  void flush();

  // The kind a reason falls in: its words before any parenthesis, digits and hex bytes as '#'
  // ("not a partrain rendezvous frame (bad magic 5e 7b 30 4c)" and "... (bad magic 39 6d af c8)"
  // are one kind; "unknown TCPStore query type 254" and "... 17" another).
  static std::string kind_of_reason(std::string_view reason);

 private:
  struct Kind {
    int64_t last_said_ns = -1;
    uint64_t held_back = 0;
    std::string last_message;
  };
  void say_held_back(Kind& kind);
  // At most this many kinds of rejection are told apart; the rest share one.
  static constexpr size_t kMaxRejectionKinds = 32;
  std::map<std::pair<Notice, std::string>, Kind> kinds_;
};

}  // namespace partrain::rendezvous::detail
