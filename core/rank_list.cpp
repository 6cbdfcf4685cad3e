// The rank-list spelling shared by the flags, the dashboard and every message naming ranks.
#include "core/rank_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/count_text.h"

namespace partrain {
namespace {

// Ranks first..last after a comma: three or more as first-last; two neighbours read better listed.
void append_range(std::string& text, int64_t first, int64_t last) {
  if (!text.empty()) text += ',';
  text += last >= first + 2 ? fmt::format("{}-{}", first, last)
          : last == first   ? fmt::format("{}", first)
                            : fmt::format("{},{}", first, last);
}

void sort_unique(std::vector<int>& ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
}

}  // namespace

StatusOr<std::vector<int>> parse_rank_list(std::string_view text) {
  std::vector<int> ranks;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::optional<int64_t> first = parse_count(item.substr(0, dash));
    const std::optional<int64_t> last =
        dash == std::string_view::npos ? first : parse_count(item.substr(dash + 1));
    if (!first || !last || *first > *last || *last > std::numeric_limits<int>::max() ||
        *last - *first >= kMostRanks - static_cast<int64_t>(ranks.size())) {
      return invalid_argument(
          "'{}': write world ranks separated by commas, A-B for ranks A to B, e.g. 0,2 or 0-3,6",
          text);
    }
    for (int64_t rank = *first; rank <= *last; ++rank) ranks.push_back(static_cast<int>(rank));
    start = comma + 1;
  }
  sort_unique(ranks);
  return ranks;
}

std::string format_rank_list(std::vector<int> ranks) {
  sort_unique(ranks);
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    append_range(text, ranks[i], ranks[j]);
    i = j + 1;
  }
  return text;
}

AbsentRanks absent_ranks(std::vector<int> held, int64_t world_size) {
  sort_unique(held);
  AbsentRanks absent;
  std::string text;
  int64_t next = 0;                    // the lowest rank not yet accounted for
  auto gap_until = [&](int64_t end) {  // ranks next..end-1 are absent
    if (end <= next) return;
    append_range(text, next, end - 1);
    absent.count += end - next;
  };
  for (int rank : held) {
    if (rank < 0) continue;
    if (rank >= world_size) break;
    gap_until(rank);
    next = int64_t{rank} + 1;
  }
  gap_until(world_size);
  if (absent.count > 0)
    absent.phrase = fmt::format("{} {}", absent.count == 1 ? "rank" : "ranks", text);
  return absent;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", format_rank_list(ranks));
}

}  // namespace partrain
