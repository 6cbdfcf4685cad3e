// What the user has chosen, apart from the data: the view, pause, help, the rank filter, scroll
// positions and the timeline's zoom and pan; and how each key changes it (DESIGN.md "Terminal UI"
// keys). Pure: the dashboard loop feeds keys in, tests feed them too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tui/view_model.h"

namespace partrain::tui {

enum class View { kOverview, kTimeline, kCollectives, kMemory, kFindings };
inline constexpr int kViewCount = 5;
std::string_view view_name(View view);   // "overview", "timeline", ...
std::string_view view_title(View view);  // "Overview", "Timeline", ...
std::optional<View> parse_view(std::string_view name);

// Keys as the terminal reports them: printable characters as themselves, the rest below.
enum Key : int {
  kKeyNone = -1,
  kKeyTab = '\t',
  kKeyEnter = '\n',
  kKeyEscape = 27,
  kKeyBackspace = 127,
  kKeyUp = 0x10000,
  kKeyDown,
  kKeyLeft,
  kKeyRight,
  kKeyBackTab,
  kKeyResize,
};

// The timeline's visible span; end nullopt follows the newest data.
struct TimelineWindow {
  std::optional<int64_t> span_ns;  // nullopt: chosen from the step time (default_span_ns)
  std::optional<int64_t> end_ns;
};

struct UiState {
  View view = View::kOverview;
  bool paused = false;
  bool help = false;
  bool editing_filter = false;
  std::string filter_text;       // what is being typed after '/'
  std::vector<int> rank_filter;  // ranks shown; empty: all
  std::string message;           // one line for the user (a bad filter), cleared by the next key
  int scroll = 0;                // first row of the current view's list
  int memory_rank = 0;           // the memory view's rank: an index into the shown ranks
  TimelineWindow timeline;
};

enum class KeyResult { kUnchanged, kRedraw, kQuit };
KeyResult handle_key(UiState& state, int key, const ViewModel& model);

// The rank list as typed at the dashboard's prompt ("0, 2,4-7"): core/rank_list.h's spelling with
// spaces and empty items forgiven; kInvalidArgument naming the text.
StatusOr<std::vector<int>> parse_rank_filter(std::string_view text);
// Whether `rank` passes the filter.
bool rank_shown(const UiState& state, int rank);
// The timeline's span when the user has not zoomed: about four recent steps, or 2 s.
int64_t default_span_ns(const ViewModel& model);
// Where the timeline ends when it follows the newest data: the latest slice or step.
int64_t newest_data_ns(const ViewModel& model);

}  // namespace partrain::tui
