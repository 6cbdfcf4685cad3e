#include "metrics/hang_watch.h"

#include <algorithm>
#include <vector>

namespace partrain::metrics {

void HangWatch::observe(const analyzers::LiveRun& run, int64_t now_ns) {
  for (const analyzers::RankStatus& rank : run.ranks) {
    if (rank.last_event_ns <= 0) continue;
    auto [it, inserted] = seen_.try_emplace(rank.rank, Seen{rank.last_event_ns, now_ns});
    if (!inserted && rank.last_event_ns > it->second.last_event_ns) {
      it->second = Seen{rank.last_event_ns, now_ns};
    }
  }
}

std::optional<int64_t> HangWatch::quiet_ns(int rank, int64_t now_ns) const {
  const auto it = seen_.find(rank);
  if (it == seen_.end()) return std::nullopt;
  return std::max<int64_t>(now_ns - it->second.read_at_ns, 0);
}

analyzers::HangState HangWatch::state(const analyzers::LiveRun& run, int64_t now_ns) const {
  std::vector<analyzers::RankSilence> silences;
  for (const auto& [rank, seen] : seen_) {
    silences.push_back({rank, seen.last_event_ns, now_ns - seen.read_at_ns});
  }
  return analyzers::judge_hang(run, silences);
}

}  // namespace partrain::metrics
