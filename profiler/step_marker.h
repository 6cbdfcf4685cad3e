// Which ranges of a foreign program are its training steps: NVTX ranges whose name matches a
// regular expression (`partrain trace --step-marker`, default PyTorch's `ProfilerStep#N`). The
// step number is the expression's first capture group when it has one and it is a number,
// otherwise the count of steps seen so far.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/status.h"

namespace partrain::profiler {

inline constexpr std::string_view kDefaultStepMarker = R"(ProfilerStep#(\d+))";
inline constexpr std::string_view kStepMarkerEnv = "PARTRAIN_STEP_MARKER";

class StepMarker {
 public:
  // kInvalidArgument naming the expression and the problem when it does not compile.
  static StatusOr<StepMarker> compile(std::string_view expression);

  // The step a range of this name is, or nullopt when it is no step marker. Not thread-safe.
  // Called for every NVTX range the program opens: names already found not to match (nearly
  // all of them: "forward", "aten::mm", ...) are answered without running the expression.
  std::optional<int64_t> step_of(std::string_view range_name);

  // For the importer to say: markers whose captured number did not read (past int64:
  // ProfilerStep#99999999999999999999), numbered by their order instead; and, with the default
  // expression, ranges named "ProfilerStep#" and no number it reads (ProfilerStep#-1), no step.
  int64_t renumbered() const { return renumbered_; }
  int64_t unnumbered() const { return unnumbered_; }

 private:
  StepMarker(std::regex expression, bool default_expression)
      : expression_(std::move(expression)), default_expression_(default_expression) {}

  // Names that did not match, up to a bound (a program naming ranges by iteration would
  // otherwise grow it without end).
  static constexpr size_t kMaxRememberedNames = 4096;

  std::regex expression_;
  bool default_expression_ = false;
  int64_t steps_seen_ = 0;
  int64_t renumbered_ = 0;
  int64_t unnumbered_ = 0;
  struct NameHash {
    using is_transparent = void;  // looked up by string_view, without a copy
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_set<std::string, NameHash, std::equal_to<>> not_markers_;
};

}  // namespace partrain::profiler
