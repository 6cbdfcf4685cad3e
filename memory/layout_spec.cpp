#include "memory/layout_spec.h"

#include <charconv>
#include <set>
#include <string>

namespace partrain::memory {
namespace {

constexpr int64_t kMostRanks = int64_t{1} << 24;  // a count past any machine, short of overflow

std::optional<int64_t> whole_number(std::string_view value, int64_t least) {
  int64_t number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (value.empty() || error != std::errc() || end != value.data() + value.size() || number < least ||
      number > kMostRanks) {
    return std::nullopt;
  }
  return number;
}

// "15/17": the items of a spec are ','-separated, so a split's layers are '/'-separated.
std::optional<std::vector<int64_t>> layer_list(std::string_view value) {
  std::vector<int64_t> layers;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find('/', start), value.size());
    const auto n = whole_number(value.substr(start, end - start), 1);
    if (!n) return std::nullopt;
    layers.push_back(*n);
    start = end + 1;
  }
  return layers;
}

// One KEY=VALUE item onto the layout; false for a key no layout has.
StatusOr<bool> apply_item(std::string_view key, std::string_view value, LayoutSpec& spec,
                          std::string_view source) {
  TrainingLayout& l = spec.layout;
  const LayoutNames keys{.naming = LayoutNaming::kSpecKeys};
  for (const LayoutDegree& d : kLayoutDegrees) {
    if (key != keys.name(d.field)) continue;
    const auto n = whole_number(value, 0);
    if (!n) return invalid_argument("{}: {}={} is not a non-negative integer", source, key, value);
    l.*d.member = static_cast<int>(*n);
    if (d.field == LayoutField::kDp) spec.dp_given = true;
    return true;
  }
  if (key == "zero" || key == "shard" || key == "mb" || key == "micro_batch") {
    const auto n = whole_number(value, 0);
    if (!n) return invalid_argument("{}: {}={} is not a non-negative integer", source, key, value);
    if (key == "zero") l.zero = static_cast<int>(*n);
    else if (key == "shard")
      l.shard = static_cast<int>(*n);
    else l.micro_batch = *n;
  } else if (key == "sp") {
    if (value != "0" && value != "1") return invalid_argument("{}: sp={} is 0 (off) or 1 (on)", source, value);
    l.sp = value == "1";
    spec.sp_given = true;
  } else if (key == "recompute") {
    const auto mode = parse_recompute(value);
    if (!mode) return invalid_argument("{}: recompute={} (none, selective or full)", source, value);
    l.recompute = *mode;
    spec.recompute_given = true;
  } else if (key == "schedule") {
    const auto schedule = parse_schedule(value);
    if (!schedule)
      return invalid_argument("{}: schedule={} ({})", source, value, schedule_choices());
    l.schedule = *schedule;
    spec.schedule_given = true;
  } else if (key == "pp_split") {
    auto split = layer_list(value);
    if (!split) {
      return invalid_argument("{}: pp_split={} is not layers per stage, e.g. pp_split=15/17 for "
                              "pp=2", source, value);
    }
    l.pp_split = std::move(*split);
    spec.pp_split_given = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string layout_spec_keys() {
  const LayoutNames keys{.naming = LayoutNaming::kSpecKeys};
  std::string out;
  for (const LayoutDegree& d : kLayoutDegrees) out += keys.name(d.field) + " ";
  return out + "zero shard mb recompute sp schedule pp_split";
}

StatusOr<LayoutSpec> parse_layout_spec(std::string_view text, const TrainingLayout& base,
                                       std::string_view source) {
  LayoutSpec spec{base, false};
  std::set<std::string_view> given;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return invalid_argument("{} '{}': '{}' is not KEY=VALUE (keys: {})", source, text, item,
                              layout_spec_keys());
    }
    const std::string_view key = item.substr(0, eq);
    // mb and micro_batch are one key.
    if (!given.insert(key == "micro_batch" ? "mb" : key).second) {
      return invalid_argument("{} '{}': {} is given twice; give each key once", source, text, key);
    }
    ASSIGN_OR_RETURN(bool known, apply_item(key, item.substr(eq + 1), spec, source));
    if (!known) {
      return invalid_argument("{}: unknown key '{}' (keys: {})", source, key, layout_spec_keys());
    }
  }
  if (spec.layout.vpp > 1 && !given.contains("schedule")) {
    spec.layout.schedule = PipelineSchedule::kInterleaved;
  }
  return spec;
}

}  // namespace partrain::memory
