// "Did you mean": the names closest to a mistyped command or flag, by edit distance with a
// transposition counted once, as git suggests for `git comit`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace partrain::cli {

// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b);

// The `names` nearest `typed`, when near enough to be a typo (a third of its length, at least
// 2 edits) or when `typed` begins one of them; empty otherwise. Best first, ties in `names`' order.
std::vector<std::string> closest_names(std::string_view typed, const std::vector<std::string>& names);

// " (did you mean `launch`?)", " (did you mean `--ranks` or `--rank`?)", or "" for none.
std::string did_you_mean(const std::vector<std::string>& suggestions);

}  // namespace partrain::cli
