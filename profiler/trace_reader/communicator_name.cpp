#include "profiler/trace_reader/communicator_name.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <optional>
#include <vector>

namespace partrain::profiler {
namespace {

// What each split of the world names, in the order the mesh makes them
// (runner/workload/ mesh.cpp: a mixture of experts adds its expert-parallel and
// expert-data-parallel groups), and each split of a pipeline group
// (runner/workload/training_rank.cpp: DualPipeV adds its ways back up the V after the
// embedding group).
constexpr std::array<std::string_view, 5> kMeshAxes = {"tp", "dp", "pp", "ep", "expert-dp"};
constexpr std::array<std::string_view, 5> kPipelineChannels = {
    "activations", "gradients", "embedding", "activations-back", "gradients-back"};
// Each split of a dp group (runner/workload/mesh.cpp): a hybrid ZeRO's shard groups, then the
// replica groups that all-reduce each shard.
constexpr std::array<std::string_view, 2> kDataGroups = {"shard", "replicas"};
constexpr int kDataParallelSplit = 1;  // kMeshAxes' dp groups, which kDataGroups split

struct Split {
  int index = 0;
  int color = 0;
};

std::optional<int> number_after(std::string_view text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return std::nullopt;
  text.remove_prefix(prefix.size());
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// "world/split1/color0/split2/color0" -> {{1, 0}, {2, 0}}; nullopt for any other shape.
std::optional<std::vector<Split>> world_splits(std::string_view id) {
  constexpr std::string_view kWorld = "world";
  if (!id.starts_with(kWorld)) return std::nullopt;
  id.remove_prefix(kWorld.size());
  std::vector<Split> splits;
  while (!id.empty()) {
    if (id.front() != '/') return std::nullopt;
    id.remove_prefix(1);
    const size_t slash = id.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const std::optional<int> index = number_after(id.substr(0, slash), "split");
    id.remove_prefix(slash + 1);
    const size_t next = std::min(id.find('/'), id.size());
    const std::optional<int> color = number_after(id.substr(0, next), "color");
    id.remove_prefix(next);
    if (!index || !color) return std::nullopt;
    splits.push_back({*index, *color});
  }
  return splits;
}

}  // namespace

std::string communicator_name(std::string_view comm_id) {
  const std::optional<std::vector<Split>> splits = world_splits(comm_id);
  if (!splits || splits->size() > 2) return std::string(comm_id);
  if (splits->empty()) return "world";
  const Split& axis = splits->front();
  if (axis.index >= static_cast<int>(kMeshAxes.size())) return std::string(comm_id);
  if (splits->size() == 1) return fmt::format("{} {}", kMeshAxes[axis.index], axis.color);
  const Split& channel = splits->back();
  if (axis.index == kDataParallelSplit && channel.index < static_cast<int>(kDataGroups.size())) {
    return fmt::format("dp {} {} {}", axis.color, kDataGroups[channel.index], channel.color);
  }
  // A pipeline group's own channels; every member of one takes colour 0.
  if (kMeshAxes[axis.index] != "pp" || channel.color != 0 ||
      channel.index >= static_cast<int>(kPipelineChannels.size())) {
    return std::string(comm_id);
  }
  if (kPipelineChannels[channel.index] == "embedding") {
    return fmt::format("embedding {}", axis.color);
  }
  return fmt::format("pp {} {}", axis.color, kPipelineChannels[channel.index]);
}

bool communicator_before(std::string_view a, std::string_view b) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (!is_digit(a[i]) || !is_digit(b[j])) {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
      continue;
    }
    // Two numbers: without leading zeros, the shorter is the smaller, else the first digit
    // that differs decides.
    size_t end_a = i, end_b = j;
    while (end_a < a.size() && is_digit(a[end_a])) ++end_a;
    while (end_b < b.size() && is_digit(b[end_b])) ++end_b;
    while (i + 1 < end_a && a[i] == '0') ++i;
    while (j + 1 < end_b && b[j] == '0') ++j;
    const std::string_view number_a = a.substr(i, end_a - i), number_b = b.substr(j, end_b - j);
    if (number_a.size() != number_b.size()) return number_a.size() < number_b.size();
    if (number_a != number_b) return number_a < number_b;
    i = end_a, j = end_b;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

}  // namespace partrain::profiler
