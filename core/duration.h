// Durations as users type them: "10s", "500ms", "2m", "1.5h", "250us"; a bare number is seconds.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain {

using Nanoseconds = std::chrono::nanoseconds;

StatusOr<Nanoseconds> parse_duration(std::string_view text);
// "1.5 s", "250 ms", "12 us": the shortest readable form, always with a unit.
std::string format_duration(Nanoseconds duration);

}  // namespace partrain
