#include "cli/suggestions.h"

#include <algorithm>
#include <numeric>

namespace partrain::cli {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: three rows of the Levenshtein table, the oldest for a swap.
  std::vector<size_t> before(b.size() + 1);
  std::vector<size_t> previous(b.size() + 1);
  std::vector<size_t> current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t replace = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, replace});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::vector<std::string> closest_names(std::string_view typed,
                                       const std::vector<std::string>& names) {
  if (typed.empty()) return {};
  const size_t most = std::max<size_t>(2, typed.size() / 3);
  size_t best = most + 1;
  std::vector<std::string> nearest;
  for (const std::string& name : names) {
    const size_t distance = name.starts_with(typed) ? 1 : edit_distance(typed, name);
    if (distance > most || distance > best) continue;
    if (distance < best) nearest.clear();
    best = distance;
    if (std::find(nearest.begin(), nearest.end(), name) == nearest.end()) nearest.push_back(name);
  }
  return nearest;
}

std::string did_you_mean(const std::vector<std::string>& suggestions) {
  if (suggestions.empty()) return "";
  std::string text = " (did you mean ";
  for (size_t i = 0; i < suggestions.size(); ++i) {
    if (i > 0) text += i + 1 == suggestions.size() ? " or " : ", ";
    text += "`" + suggestions[i] + "`";
  }
  return text + "?)";
}

}  // namespace partrain::cli
