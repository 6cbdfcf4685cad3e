#include "tui/ui_state.h"

#include <algorithm>
#include <array>

#include "core/rank_list.h"

namespace partrain::tui {
namespace {

constexpr std::array<std::string_view, kViewCount> kNames = {"overview", "timeline", "collectives",
                                                             "memory", "findings"};
constexpr std::array<std::string_view, kViewCount> kTitles = {"Overview", "Timeline", "Collectives",
                                                              "Memory", "Findings"};
constexpr int64_t kMinSpanNs = 10'000;               // 10 us: a few kernels
constexpr int64_t kMaxSpanNs = 24 * 3'600'000'000'000;  // a day

View shifted(View view, int by) {
  return static_cast<View>((static_cast<int>(view) + by + kViewCount) % kViewCount);
}

int64_t timeline_span(const UiState& state, const ViewModel& model) {
  return state.timeline.span_ns.value_or(default_span_ns(model));
}

void pan(UiState& state, const ViewModel& model, int direction) {
  const int64_t span = timeline_span(state, model);
  const int64_t newest = newest_data_ns(model);
  const int64_t end = state.timeline.end_ns.value_or(newest) + direction * span / 4;
  // Panning past the newest data follows it again.
  state.timeline.end_ns = end >= newest ? std::nullopt : std::optional<int64_t>(end);
}

// Zooming out stops once the whole run fits twice over.
void zoom(UiState& state, const ViewModel& model, bool in) {
  const int64_t span = timeline_span(state, model);
  const int64_t run = newest_data_ns(model) - model.start_ns;
  const int64_t widest =
      model.start_ns > 0 && run > 0 ? std::clamp(2 * run, kMinSpanNs, kMaxSpanNs) : kMaxSpanNs;
  state.timeline.span_ns = std::clamp(in ? span / 2 : std::max(span, std::min(span * 2, widest)),
                                      kMinSpanNs, kMaxSpanNs);
}

KeyResult edit_filter(UiState& state, int key) {
  if (key == kKeyEscape) {
    state.editing_filter = false;
    return KeyResult::kRedraw;
  }
  if (key == kKeyEnter || key == '\r') {
    state.editing_filter = false;
    StatusOr<std::vector<int>> ranks = parse_rank_filter(state.filter_text);
    if (ranks.is_ok()) {
      state.rank_filter = *ranks;
      state.scroll = 0;
    } else {
      state.message = ranks.status().message();
    }
    return KeyResult::kRedraw;
  }
  if (key == kKeyBackspace || key == 8 || key == 263 /* KEY_BACKSPACE */) {
    if (!state.filter_text.empty()) state.filter_text.pop_back();
    return KeyResult::kRedraw;
  }
  if ((key >= '0' && key <= '9') || key == ',' || key == '-' || key == ' ') {
    if (state.filter_text.size() < 64) state.filter_text += static_cast<char>(key);
    return KeyResult::kRedraw;
  }
  return KeyResult::kUnchanged;
}

}  // namespace

std::string_view view_name(View view) { return kNames[static_cast<size_t>(view)]; }
std::string_view view_title(View view) { return kTitles[static_cast<size_t>(view)]; }

std::optional<View> parse_view(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<View>(i);
  }
  return std::nullopt;
}

KeyResult handle_key(UiState& state, int key, const ViewModel& model) {
  if (key == kKeyNone) return KeyResult::kUnchanged;
  if (key == kKeyResize) return KeyResult::kRedraw;
  if (state.editing_filter) return edit_filter(state, key);
  state.message.clear();
  if (state.help && key != 'q' && key != 'Q') {
    state.help = false;  // any key closes the help, as in htop
    return KeyResult::kRedraw;
  }
  switch (key) {
    case 'q':
    case 'Q': return KeyResult::kQuit;
    case '1': case '2': case '3': case '4': case '5':
      state.view = static_cast<View>(key - '1');
      state.scroll = 0;
      return KeyResult::kRedraw;
    case kKeyTab: state.view = shifted(state.view, 1); state.scroll = 0; return KeyResult::kRedraw;
    case kKeyBackTab: state.view = shifted(state.view, -1); state.scroll = 0; return KeyResult::kRedraw;
    case '?': state.help = true; return KeyResult::kRedraw;
    case 'p':
    case ' ': state.paused = !state.paused; return KeyResult::kRedraw;
    case '/':
      state.editing_filter = true;
      state.filter_text.clear();
      return KeyResult::kRedraw;
    case kKeyUp:
    case 'k': state.scroll = std::max(0, state.scroll - 1); return KeyResult::kRedraw;
    case kKeyDown:
    case 'j': ++state.scroll; return KeyResult::kRedraw;  // views clamp to what they hold
    case kKeyLeft:
    case 'h':
      if (state.view == View::kMemory) --state.memory_rank; else pan(state, model, -1);
      return KeyResult::kRedraw;
    case kKeyRight:
    case 'l':
      if (state.view == View::kMemory) ++state.memory_rank; else pan(state, model, 1);
      return KeyResult::kRedraw;
    case '+':
    case '=':
    case ']': zoom(state, model, true); return KeyResult::kRedraw;
    case '-':
    case '[': zoom(state, model, false); return KeyResult::kRedraw;
    case 'f': state.timeline = TimelineWindow{}; return KeyResult::kRedraw;
    default: return KeyResult::kUnchanged;
  }
}

StatusOr<std::vector<int>> parse_rank_filter(std::string_view text) {
  // Typed at a prompt, not a flag: spaces and empty items ("0, 2,") are forgiven.
  std::string list;
  for (char c : text) {
    if (c == ' ' || (c == ',' && (list.empty() || list.back() == ','))) continue;
    list += c;
  }
  if (!list.empty() && list.back() == ',') list.pop_back();
  if (list.empty()) return std::vector<int>{};
  StatusOr<std::vector<int>> ranks = parse_rank_list(list);
  if (!ranks.is_ok()) return invalid_argument("rank filter {}", ranks.status().message());
  return ranks;
}

bool rank_shown(const UiState& state, int rank) {
  return state.rank_filter.empty() ||
         std::binary_search(state.rank_filter.begin(), state.rank_filter.end(), rank);
}

int64_t newest_data_ns(const ViewModel& model) {
  return model.data_end_ns > 0 ? model.data_end_ns : model.end_ns;
}

int64_t default_span_ns(const ViewModel& model) {
  for (const auto& [rank, marks] : model.steps) {
    if (!marks.empty() && marks.back().dur_ns > 0) {
      return std::clamp<int64_t>(4 * marks.back().dur_ns, kMinSpanNs, kMaxSpanNs);
    }
  }
  return 2'000'000'000;
}

}  // namespace partrain::tui
